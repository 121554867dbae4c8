-- count.lua: counts a scope's members. Read-only: it writes no key.
-- KEYS[1] the scope's count key (P:{sB}:n:CLASS:SCOPE)
-- ARGV, in the order the engine sends them:
local ARG_NOW = 1      -- now ms or ""
local ARG_LAYOUT = 2
local ARG_DATA = 3     -- data key (compact and approx: up to the shard number or bucket start)
local ARG_TAIL = 4     -- key tail
local ARG_WINDOW = 5   -- ms
local ARG_BUCKET = 6   -- approx bucket ms
local ARG_PEEK = 7     -- "peek": only read the count key
-- Returns {now, count, asOf}. Exact and approx counts are live; a compact
-- count is the one the last sweep wrote, or, when there is none, the
-- members stored as of now (the self-sized scope's meta). A peek at a
-- missing count key returns count -1 (a spread scope's shards live in
-- other slots: the core sums them).
-- Reads never write (docs/design.md §9): only a sweep writes the count key,
-- so reading scopes nobody touched creates no key. The sum is not written
-- back, not even with an expiry: that would let any caller create a key
-- per scope name it read.
local now = clock(ARGV[ARG_NOW])
local layout = ARGV[ARG_LAYOUT]
if layout == LayoutCompact then
  local v = redis.call('GET', KEYS[1])
  if v then
    local f = split(v, ':')
    return { now, tonumber(f[1]), tonumber(f[2]) }
  end
  if ARGV[ARG_PEEK] == 'peek' then return { now, -1, 0 } end
end
local n = size(layout, ARGV[ARG_DATA], ARGV[ARG_TAIL], tonumber(ARGV[ARG_WINDOW]), 0, -1,
  tonumber(ARGV[ARG_BUCKET]), now)
return { now, n, now }
