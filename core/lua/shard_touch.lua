-- shard_touch.lua: records members' activity in one spread compact shard.
-- KEYS[1] the shard
-- ARGV[1] now ms or ""  ARGV[2] key lifetime ms  ARGV[3..] members
-- Returns {now}.
local now = clock(ARGV[1])
for i = 3, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], stamp(now)) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return { now }
