-- active.lua: counts a scope's members active within the last d ms.
-- KEYS[1] the scope's count key (routing only)
-- ARGV, in the order the engine sends them:
local ARG_NOW = 1         -- now ms or ""
local ARG_LAYOUT = 2
local ARG_DATA = 3        -- data key (compact and approx: up to the shard number or bucket start)
local ARG_TAIL = 4        -- key tail
local ARG_WITHIN = 5      -- d ms
local ARG_SHARD_END = 6   -- compact: count shards ARG_SHARD_FIRST to ARG_SHARD_END - 1
                          -- (-1: every shard of a self-sized scope)
local ARG_BUCKET = 7      -- approx bucket ms
local ARG_SHARD_FIRST = 8
-- Returns {now, count}. An approx count covers whole buckets, so it may
-- include members up to one bucket older than d.
local now = clock(ARGV[ARG_NOW])
local layout, key, tail = ARGV[ARG_LAYOUT], ARGV[ARG_DATA], ARGV[ARG_TAIL]
local d = tonumber(ARGV[ARG_WITHIN])
if layout ~= LayoutCompact then
  return { now, size(layout, key, tail, d, 0, 0, tonumber(ARGV[ARG_BUCKET]), now) }
end
local n, last = 0, tonumber(ARGV[ARG_SHARD_END])
if last < 0 then last = shardCount(compactState(key, tail)) end
for i = tonumber(ARGV[ARG_SHARD_FIRST]), last - 1 do
  local vals = redis.call('HVALS', key .. i .. tail)
  for _, v in ipairs(vals) do
    if age(now, v) <= d then n = n + 1 end
  end
end
return { now, n }
