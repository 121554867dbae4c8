-- shard_drop.lua: deletes a released scope's spread shard, unless a touch
-- has refilled it since the release was decided.
-- KEYS[1] the shard
-- Returns 1 if deleted, else 0.
if redis.call('HLEN', KEYS[1]) == 0 then return redis.call('DEL', KEYS[1]) end
return 0
