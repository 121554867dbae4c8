-- active.lua: counts a scope's members active within the last d ms.
-- KEYS[1] the scope's count key (routing only)
-- ARGV[1] now ms or ""  ARGV[2] layout  ARGV[3] data key (compact and
-- approx: up to the shard number or bucket start)  ARGV[4] key tail
-- ARGV[5] d ms  ARGV[6] compact: count shards ARGV[8] to ARGV[6] - 1
-- ARGV[7] approx bucket ms  ARGV[8] first shard
-- Returns {now, count}. An approx count covers whole buckets, so it may
-- include members up to one bucket older than d.
local now = clock(ARGV[1])
local layout, key, tail = ARGV[2], ARGV[3], ARGV[4]
local d = tonumber(ARGV[5])
if layout ~= '1' then
  return { now, size(layout, key, tail, d, 0, 0, tonumber(ARGV[7]), now) }
end
local n = 0
for i = tonumber(ARGV[8]), tonumber(ARGV[6]) - 1 do
  local vals = redis.call('HVALS', key .. i .. tail)
  for _, v in ipairs(vals) do
    if age(now, v) <= d then n = n + 1 end
  end
end
return { now, n }
