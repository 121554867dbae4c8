-- leave.lua: removes a member from a scope at once.
-- KEYS[1] the data key: the exact layout's sorted set or the member's
-- compact shard  KEYS[2] (compact, shards in the bucket's slot) the
-- bucket's release counters, where "#ref" counts member changes
-- ARGV[1] layout (0 exact, 1 compact)  ARGV[2] member  ARGV[3] scope ref
-- Returns 1 if the member was there, else 0.
if ARGV[1] == '0' then
  return redis.call('ZREM', KEYS[1], ARGV[2])
end
local n = redis.call('HDEL', KEYS[1], ARGV[2])
if n == 1 and KEYS[2] then redis.call('HINCRBY', KEYS[2], '#' .. ARGV[3], 1) end
return n
