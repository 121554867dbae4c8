-- count.lua: counts a scope's members.
-- KEYS[1] the scope's count key (P:{sB}:n:CLASS:SCOPE)
-- ARGV[1] now ms or ""  ARGV[2] layout  ARGV[3] data key (compact and
-- approx: up to the shard number or bucket start)  ARGV[4] key tail
-- ARGV[5] window ms  ARGV[6] shards  ARGV[7] approx bucket ms
-- ARGV[8] count key lifetime ms  ARGV[9] "peek": only read the count key
-- Returns {now, count, asOf}. Exact and approx counts are live; a compact
-- count is the one the last sweep wrote, or, when there is none, the sum of
-- the shard sizes, which is then written. A peek at a missing count key
-- returns count -1 (spread shards live in other slots: the core sums them).
local now = clock(ARGV[1])
local layout = ARGV[2]
if layout == '1' then
  local v = redis.call('GET', KEYS[1])
  if v then
    local f = split(v, ':')
    return { now, tonumber(f[1]), tonumber(f[2]) }
  end
  if ARGV[9] == 'peek' then return { now, -1, 0 } end
end
local n = size(layout, ARGV[3], ARGV[4], tonumber(ARGV[5]), 0, tonumber(ARGV[6]), tonumber(ARGV[7]), now)
-- Caching the count is a courtesy: a refusal (over maxmemory) must not fail the read.
if layout == '1' then redis.pcall('SET', KEYS[1], n .. ':' .. fmt(now), 'PX', ARGV[8]) end
return { now, n, now }
