-- shard_touch.lua: records members' activity in one spread compact shard.
-- KEYS[1] the shard
-- ARGV:
local ARG_NOW = 1      -- now ms or ""
local ARG_LIFETIME = 2 -- key lifetime ms
local ARG_MEMBER1 = 3  -- then the members
-- Returns {now}.
local now = clock(ARGV[ARG_NOW])
for i = ARG_MEMBER1, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], stamp(now)) end
redis.call('PEXPIRE', KEYS[1], ARGV[ARG_LIFETIME])
return { now }
