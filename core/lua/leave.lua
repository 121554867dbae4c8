-- leave.lua: removes a member from a scope at once.
-- KEYS[1] the data key: the exact layout's sorted set, a spread compact
-- scope's shard of the member, or a self-sized compact scope's meta
-- ARGV:
local ARG_LAYOUT = 1 -- LayoutExact or LayoutCompact
local ARG_MEMBER = 2
local ARG_PREFIX = 3 -- self-sized compact: the shards' prefix ("" for a spread shard)
local ARG_TAIL = 4   -- self-sized compact: the key tail
local ARG_HASH = 5   -- self-sized compact: the member's memberHash
-- Returns 1 if the member was there, else 0.
if ARGV[ARG_LAYOUT] == LayoutExact then
  return redis.call('ZREM', KEYS[1], ARGV[ARG_MEMBER])
end
if ARGV[ARG_PREFIX] == '' then return redis.call('HDEL', KEYS[1], ARGV[ARG_MEMBER]) end
local c = compactState(ARGV[ARG_PREFIX], ARGV[ARG_TAIL])
local n = shardOf(c, tonumber(ARGV[ARG_HASH]))
local gone = redis.call('HDEL', c.prefix .. n .. c.tail, ARGV[ARG_MEMBER])
if gone == 1 then
  -- counted out at once; the shard's due score stays (early is allowed),
  -- and the sweep merges shards when the scope has shrunk
  if redis.call('HINCRBY', c.meta, n, -1) <= 0 then redis.call('HDEL', c.meta, n) end
  c.t = c.t - 1
  saveState(c)
end
return gone
