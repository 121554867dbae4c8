-- shard_sweep.lua: removes the members of one spread compact shard whose
-- window has passed (checked and deleted inside this script).
-- KEYS[1] the shard
-- ARGV[1] now ms or ""  ARGV[2] window ms
-- Returns {now, removed, remaining}.
local now = clock(ARGV[1])
local win = tonumber(ARGV[2])
local flat = redis.call('HGETALL', KEYS[1])
local removed = 0
for i = 1, #flat, 2 do
  if age(now, flat[i + 1]) > win then
    redis.call('HDEL', KEYS[1], flat[i])
    removed = removed + 1
  end
end
return { now, removed, #flat / 2 - removed }
