-- count_set.lua: writes a scope's count key, when none was there.
-- KEYS[1] the count key
-- ARGV:
local ARG_COUNT = 1
local ARG_AS_OF = 2    -- ms
local ARG_LIFETIME = 3 -- ms
-- Returns {count, asOf} of the key as it now stands (a sweep's write wins).
local v = redis.call('GET', KEYS[1])
if v then
  local f = split(v, ':')
  return { tonumber(f[1]), tonumber(f[2]) }
end
-- a courtesy cache: a refusal (over maxmemory) must not fail the read
redis.pcall('SET', KEYS[1], ARGV[ARG_COUNT] .. ':' .. ARGV[ARG_AS_OF], 'PX', ARGV[ARG_LIFETIME])
return { tonumber(ARGV[ARG_COUNT]), tonumber(ARGV[ARG_AS_OF]) }
