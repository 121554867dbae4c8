-- count_set.lua: writes a scope's count key, when none was there.
-- KEYS[1] the count key
-- ARGV[1] count  ARGV[2] as-of ms  ARGV[3] lifetime ms
-- Returns {count, asOf} of the key as it now stands (a sweep's write wins).
local v = redis.call('GET', KEYS[1])
if v then
  local f = split(v, ':')
  return { tonumber(f[1]), tonumber(f[2]) }
end
-- a courtesy cache: a refusal (over maxmemory) must not fail the read
redis.pcall('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[3])
return { tonumber(ARGV[1]), tonumber(ARGV[2]) }
