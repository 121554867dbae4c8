-- leave.lua: removes a member from a scope at once.
-- KEYS[1] the data key: the exact layout's sorted set or the member's
-- compact shard
-- ARGV[1] layout (0 exact, 1 compact)  ARGV[2] member
-- Returns 1 if the member was there, else 0.
if ARGV[1] == '0' then
  return redis.call('ZREM', KEYS[1], ARGV[2])
end
return redis.call('HDEL', KEYS[1], ARGV[2])
