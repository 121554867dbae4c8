-- shard_len.lua: the number of members stored in one compact shard.
-- KEYS[1] the shard
-- Returns the count.
return redis.call('HLEN', KEYS[1])
