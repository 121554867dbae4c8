-- leave.lua: removes a member from a scope at once.
-- KEYS[1] the data key: the exact layout's sorted set or the member's
-- compact shard  KEYS[2] (compact, shards in the bucket's slot) the
-- bucket's release counters, where "#ref" counts member changes
-- ARGV:
local ARG_LAYOUT = 1 -- 0 exact, 1 compact
local ARG_MEMBER = 2
local ARG_REF = 3    -- scope ref
-- Returns 1 if the member was there, else 0.
if ARGV[ARG_LAYOUT] == '0' then
  return redis.call('ZREM', KEYS[1], ARGV[ARG_MEMBER])
end
local n = redis.call('HDEL', KEYS[1], ARGV[ARG_MEMBER])
if n == 1 and KEYS[2] then redis.call('HINCRBY', KEYS[2], '#' .. ARGV[ARG_REF], 1) end
return n
