-- touch.lua: records members' activity in scopes of one scope bucket.
-- KEYS[1] the bucket's scope registry (P:{sB}:reg)  KEYS[2] the bucket's
-- release counters (P:{sB}:rel), where "#ref" counts the member changes of a
-- compact scope (see sweep_scopes.lua)
-- ARGV[1] now ms or "" (server TIME)  ARGV[2] key grace ms  ARGV[3] n;
-- then 8 fields for each touch:
--   layout (0 exact, 1 compact, 2 approx, 3 registry only: a spread
--   compact shard is written by shard_touch.lua), data key (exact: the
--   sorted set; compact: the member's shard; approx: the bucket key up to
--   its start),
--   key tail (approx: what follows the bucket start), scope ref, member,
--   window ms, sweep interval ms, approx bucket ms
-- Returns {now}.
local now = clock(ARGV[1])
local grace = tonumber(ARGV[2])
local registered = {}
for i = 0, tonumber(ARGV[3]) - 1 do
  local a = 4 + i * 8
  local layout, key, tail, ref, member = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local win, interval, bucket = tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6]), tonumber(ARGV[a + 7])
  if layout == '0' then
    redis.call('ZADD', key, now, member)
    redis.call('PEXPIRE', key, win + grace)
  elseif layout == '1' then
    if redis.call('HSET', key, member, stamp(now)) == 1 then
      -- a new member: a sweep walking the scope over several steps must
      -- know that its running sum may have missed it
      redis.call('HINCRBY', KEYS[2], '#' .. ref, 1)
    end
    redis.call('PEXPIRE', key, win + grace)
  elseif layout == '2' then
    local b = math.floor(now / bucket) * bucket
    local k = key .. fmt(b) .. tail
    redis.call('PFADD', k, member)
    redis.call('PEXPIRE', k, win + bucket + grace)
  end
  if not registered[ref] then
    -- once per scope and call: a batch into one hot scope is one ZADD
    redis.call('ZADD', KEYS[1], 'NX', now + interval, ref)
    registered[ref] = true
  end
end
return { now }
