-- members.lua: one page of a scope's live members.
-- KEYS[1] the scope's count key (routing only)
-- ARGV, in the order the engine sends them:
local ARG_NOW = 1    -- now ms or ""
local ARG_LAYOUT = 2 -- LayoutExact or LayoutCompact
local ARG_DATA = 3   -- data key (compact: up to the shard number)
local ARG_TAIL = 4   -- key tail
local ARG_WINDOW = 5 -- ms
local ARG_SHARDS = 6 -- compact: shards to read up to (-1: all of a self-sized scope)
local ARG_SHARD = 7  -- cursor: shard
local ARG_OFFSET = 8 -- cursor: offset
local ARG_PAGE = 9   -- page size
-- Returns {now, next shard, next offset, members}: members holds member,
-- last touch ms; the next cursor is -1, -1 after the last page. Exact pages
-- run by recency (newest first, ties by member descending); compact pages
-- run shard by shard, members ascending within a shard.
local now = clock(ARGV[ARG_NOW])
local key, tail, win = ARGV[ARG_DATA], ARGV[ARG_TAIL], tonumber(ARGV[ARG_WINDOW])
local from = now - win
local shard, offset, limit = tonumber(ARGV[ARG_SHARD]), tonumber(ARGV[ARG_OFFSET]), tonumber(ARGV[ARG_PAGE])
if ARGV[ARG_LAYOUT] == LayoutExact then
  local page = redis.call('ZREVRANGEBYSCORE', key, '+inf', from, 'WITHSCORES', 'LIMIT', offset, limit)
  if #page / 2 < limit then return { now, -1, -1, page } end
  return { now, 0, offset + limit, page }
end
local out = {}
local shards = tonumber(ARGV[ARG_SHARDS])
if shards < 0 then shards = shardCount(compactState(key, tail)) end
while shard < shards do
  local flat = redis.call('HGETALL', key .. shard .. tail)
  local live = {}
  for i = 1, #flat, 2 do
    local a = age(now, flat[i + 1])
    if a <= win then live[#live + 1] = { flat[i], fmt(now - a) } end
  end
  table.sort(live, function(x, y) return x[1] < y[1] end)
  while offset < #live do
    if #out / 2 >= limit then return { now, shard, offset, out } end
    offset = offset + 1
    out[#out + 1] = live[offset][1]
    out[#out + 1] = live[offset][2]
  end
  shard, offset = shard + 1, 0
end
return { now, -1, -1, out }
