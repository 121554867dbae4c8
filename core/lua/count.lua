-- count.lua: counts a scope's members. Read-only: it writes no key.
-- KEYS[1] the scope's count key (P:{sB}:n:CLASS:SCOPE)
-- ARGV, in the order the engine sends them:
local ARG_NOW = 1      -- now ms or ""
local ARG_LAYOUT = 2
local ARG_DATA = 3     -- data key (compact and approx: up to the shard number or bucket start)
local ARG_TAIL = 4     -- key tail
local ARG_WINDOW = 5   -- ms
local ARG_SHARDS = 6    -- compact: sum shards ARG_SHARD_FIRST to ARG_SHARDS - 1
local ARG_BUCKET = 7   -- approx bucket ms
local ARG_PEEK = 8     -- "peek": only read the count key; "sum": only sum the shards
local ARG_SHARD_FIRST = 9
-- Returns {now, count, asOf}. Exact and approx counts are live; a compact
-- count is the one the last sweep wrote, or, when there is none, the sum of
-- the shard sizes as of now. A peek at a missing count key returns count -1
-- (spread shards live in other slots, and many shards take several calls:
-- the core sums them, "sum" by "sum").
-- Reads never write (docs/design.md §9): only a sweep writes the count key,
-- so reading scopes nobody touched creates no key. This script used to write
-- the sum back with expiry CountTTL (count_set.lua did so for a spread
-- scope), letting any caller create a key per scope name it read.
local now = clock(ARGV[ARG_NOW])
local layout = ARGV[ARG_LAYOUT]
if layout == '1' and ARGV[ARG_PEEK] ~= 'sum' then
  local v = redis.call('GET', KEYS[1])
  if v then
    local f = split(v, ':')
    return { now, tonumber(f[1]), tonumber(f[2]) }
  end
  if ARGV[ARG_PEEK] == 'peek' then return { now, -1, 0 } end
end
local n = size(layout, ARGV[ARG_DATA], ARGV[ARG_TAIL], tonumber(ARGV[ARG_WINDOW]), tonumber(ARGV[ARG_SHARD_FIRST]),
  tonumber(ARGV[ARG_SHARDS]),
  tonumber(ARGV[ARG_BUCKET]), now)
return { now, n, now }
