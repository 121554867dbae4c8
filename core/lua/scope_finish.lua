-- scope_finish.lua: ends the sweep of a spread compact scope whose shards
-- the core swept.
-- KEYS[1] the bucket's scope registry  KEYS[2] the bucket's release counters
-- KEYS[3] the scope's count key
-- ARGV[1] now ms or ""  ARGV[2] scope ref  ARGV[3] count  ARGV[4] empty
-- sweeps so far  ARGV[5] empty sweeps before release  ARGV[6] count key
-- lifetime ms  ARGV[7] the class's sweep interval ms
-- Returns 1 if the scope was released (the core then drops its shards), else 0.
local now = clock(ARGV[1])
if finish(KEYS[1], KEYS[2], KEYS[3], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), now,
    tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])) then
  return 1
end
return 0
