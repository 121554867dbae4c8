-- scope_finish.lua: ends the sweep of a spread compact scope whose shards
-- the core swept.
-- KEYS[1] the bucket's scope registry  KEYS[2] the bucket's release counters
-- KEYS[3] the scope's count key
-- ARGV:
local ARG_NOW = 1           -- now ms or ""
local ARG_REF = 2           -- scope ref
local ARG_COUNT = 3
local ARG_EMPTIES = 4       -- empty sweeps so far
local ARG_RELEASE_AFTER = 5 -- empty sweeps before release
local ARG_LIFETIME = 6      -- count key lifetime ms
local ARG_INTERVAL = 7      -- the class's sweep interval ms
-- Returns 1 if the scope was released (the core then drops its shards), else 0.
local now = clock(ARGV[ARG_NOW])
if finish(KEYS[1], KEYS[2], KEYS[3], ARGV[ARG_REF], tonumber(ARGV[ARG_COUNT]), tonumber(ARGV[ARG_EMPTIES]), now,
    tonumber(ARGV[ARG_RELEASE_AFTER]), ARGV[ARG_LIFETIME], tonumber(ARGV[ARG_INTERVAL])) then
  return 1
end
return 0
