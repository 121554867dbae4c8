-- members.lua: one page of a scope's live members.
-- KEYS[1] the scope's count key (routing only)
-- ARGV[1] now ms or ""  ARGV[2] layout (0 exact, 1 compact)
-- ARGV[3] data key (compact: up to the shard number)  ARGV[4] key tail
-- ARGV[5] window ms  ARGV[6] shards  ARGV[7] cursor shard  ARGV[8] cursor
-- offset  ARGV[9] page size
-- Returns {now, next shard, next offset, members}: members holds member,
-- last touch ms; the next cursor is -1, -1 after the last page. Exact pages
-- run by recency (newest first, ties by member descending); compact pages
-- run shard by shard, members ascending within a shard.
local now = clock(ARGV[1])
local key, tail, win = ARGV[3], ARGV[4], tonumber(ARGV[5])
local from = now - win
local shard, offset, limit = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
if ARGV[2] == '0' then
  local page = redis.call('ZREVRANGEBYSCORE', key, '+inf', from, 'WITHSCORES', 'LIMIT', offset, limit)
  if #page / 2 < limit then return { now, -1, -1, page } end
  return { now, 0, offset + limit, page }
end
local out = {}
local shards = tonumber(ARGV[6])
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
