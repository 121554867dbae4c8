-- scopelib.lua: helpers shared by the scope scripts (appended after userlib.lua).

-- buckets lists the approx bucket keys that cover [from, now].
local function buckets(key, tail, from, now, bucket)
  local out = {}
  local b = math.floor(from / bucket) * bucket
  while b <= now do
    out[#out + 1] = key .. fmt(b) .. tail
    b = b + bucket
  end
  return out
end



-- Self-sized compact scopes (docs/design.md §9). A scope whose shards share
-- its bucket's slot keeps, beside its shards prefix .. N .. tail, a meta
-- hash prefix .. 'm' .. tail (L the level, s the split pointer, t the
-- members stored, and for each shard N its size) and a due index, the zset
-- prefix .. 'i' .. tail of shard N -> the earliest instant one of its
-- members' window passes: a score may be early, never late. Shard numbers
-- are digits, so neither name is a shard's. Shards follow linear hashing
-- over memberHash: a member is in shard h mod 2^L, or h mod 2^(L+1) when
-- that is below the split pointer; a touch that takes t past size × shards
-- splits shard s, a sweep that leaves t under a quarter of that merges the
-- last shard back. Members keep their stamps through both, so a count (t)
-- never depends on the shard count.
local META_LEVEL, META_SPLIT, META_TOTAL = 'L', 's', 't'

-- MAX_SHARDS bounds a self-sized scope's shards (members' cursors name a
-- shard below it): past it, shards grow instead.
local MAX_SHARDS = 65536

-- memberHash is the first 32 bits of SHA1(member), as the core's memberHash
-- (layout.go): the engine sends it with each touch and leave, splits and
-- merges compute it for the members they move.
local function memberHash(m) return tonumber(string.sub(redis.sha1hex(m), 1, 8), 16) end

-- compactState reads a self-sized scope's meta: {level, split pointer,
-- members stored, shards}; a missing meta is one shard, empty.
local function compactState(prefix, tail)
  local meta = prefix .. 'm' .. tail
  local v = redis.call('HMGET', meta, META_LEVEL, META_SPLIT, META_TOTAL)
  local c = { meta = meta, idx = prefix .. 'i' .. tail, prefix = prefix, tail = tail,
    lv = tonumber(v[1] or 0), sp = tonumber(v[2] or 0), t = tonumber(v[3] or 0) }
  c.p = 2 ^ c.lv
  c.t0, c.lv0, c.sp0 = c.t, c.lv, c.sp
  return c
end

local function shardCount(c) return c.p + c.sp end

-- dueAt is the instant after the window (win ms) of a member with stamp v
-- passes, as a shard's due score holds it.
local function dueAt(now, v, win) return now - age(now, v) + win + 1 end

-- shardOf is the shard of a member whose memberHash is h.
local function shardOf(c, h)
  local n = h % c.p
  if n < c.sp then n = h % (2 * c.p) end
  return n
end

-- setSize records shard n's size in the meta, and adds the change to t.
local function setSize(c, n, size)
  local rec = tonumber(redis.call('HGET', c.meta, n) or 0)
  if size > 0 then redis.call('HSET', c.meta, n, size) else redis.call('HDEL', c.meta, n) end
  c.t = c.t + size - rec
end

-- moveMembers moves the members of flat (member, stamp, ...) to shard key
-- dst with the later of the two keys' expiries and, unless the caller
-- indexes them itself (indexed), the earlier of their due scores. Returns
-- how many moved.
local function moveMembers(c, flat, src, dst, from, to, indexed)
  if #flat == 0 then return 0 end
  -- expiries before the moves: a source emptied by them is gone
  local ttl, ttl2 = redis.call('PTTL', src), redis.call('PTTL', dst)
  if ttl2 > ttl then ttl = ttl2 end
  for i = 1, #flat, 4000 do
    redis.call('HSET', dst, unpack(flat, i, math.min(i + 3999, #flat)))
  end
  local names = {}
  for i = 1, #flat, 2 do names[#names + 1] = flat[i] end
  for i = 1, #names, 4000 do
    redis.call('HDEL', src, unpack(names, i, math.min(i + 3999, #names)))
  end
  if ttl > 0 then redis.call('PEXPIRE', dst, ttl) end
  if indexed then return #names end
  local a, b = redis.call('ZSCORE', c.idx, from), redis.call('ZSCORE', c.idx, to)
  if a and (not b or a + 0 < b + 0) then redis.call('ZADD', c.idx, a, to) end
  return #names
end

-- splitShard splits shard s into s and s + 2^L and moves the split
-- pointer. Each half is indexed at its members' earliest deadline (window
-- win ms), read from their stamps: a half that inherited the shard's score
-- would be visited for the other half's members, and each of its own
-- splits would pass the score on, so that a scope grown from a few early
-- members would have every shard due at their deadline. Returns the
-- entries it read.
local function splitShard(c, now, win)
  local from, to = c.sp, c.sp + c.p
  local src, dst = c.prefix .. from .. c.tail, c.prefix .. to .. c.tail
  local flat = redis.call('HGETALL', src)
  local moved = {}
  local due = {}
  for i = 1, #flat, 2 do
    local n = from
    if memberHash(flat[i]) % (2 * c.p) == to then
      n = to
      moved[#moved + 1] = flat[i]
      moved[#moved + 1] = flat[i + 1]
    end
    local at = dueAt(now, flat[i + 1], win)
    if not due[n] or at < due[n] then due[n] = at end
  end
  local k = moveMembers(c, moved, src, dst, from, to, true)
  for _, n in ipairs({ from, to }) do
    if due[n] then redis.call('ZADD', c.idx, fmt(due[n]), n) else redis.call('ZREM', c.idx, n) end
  end
  setSize(c, from, #flat / 2 - k)
  setSize(c, to, k)
  c.sp = c.sp + 1
  if c.sp == c.p then c.lv, c.sp, c.p = c.lv + 1, 0, c.p * 2 end
  return #flat / 2
end

-- mergeShard merges the last shard back into its buddy. Returns the
-- entries it moved.
local function mergeShard(c)
  if c.sp == 0 then c.lv, c.p, c.sp = c.lv - 1, c.p / 2, c.p / 2 end
  c.sp = c.sp - 1
  local from, to = c.sp + c.p, c.sp
  local src, dst = c.prefix .. from .. c.tail, c.prefix .. to .. c.tail
  local k = moveMembers(c, redis.call('HGETALL', src), src, dst, from, to)
  redis.call('ZREM', c.idx, from)
  setSize(c, to, tonumber(redis.call('HLEN', dst)))
  setSize(c, from, 0)
  return k
end

-- saveState writes back what changed of a self-sized scope's meta, with
-- the meta's and the index's expiry when life is given; an empty scope of
-- one shard needs neither key.
local function saveState(c, life)
  if c.t <= 0 and c.lv == 0 and c.sp == 0 then
    redis.call('DEL', c.meta, c.idx)
    return
  end
  if c.t ~= c.t0 or c.lv ~= c.lv0 or c.sp ~= c.sp0 then
    redis.call('HSET', c.meta, META_LEVEL, c.lv, META_SPLIT, c.sp, META_TOTAL, c.t)
    c.t0, c.lv0, c.sp0 = c.t, c.lv, c.sp
  end
  if life then
    redis.call('PEXPIRE', c.meta, life)
    redis.call('PEXPIRE', c.idx, life)
  end
end

-- sweepDue sweeps shard n of a self-sized scope, due in its index: the
-- members whose window has passed are deleted (checked here), the shard's
-- size recorded and its due score set to its earliest remaining deadline.
-- Returns removed, entries read.
local function sweepDue(c, n, win, now)
  local key = c.prefix .. n .. c.tail
  local flat = redis.call('HGETALL', key)
  local dead, first = {}, nil
  for i = 1, #flat, 2 do
    local at = dueAt(now, flat[i + 1], win)
    if at <= now then
      dead[#dead + 1] = flat[i]
    elseif not first or at < first then
      first = at
    end
  end
  local removed = 0
  for i = 1, #dead, 4000 do
    removed = removed + redis.call('HDEL', key, unpack(dead, i, math.min(i + 3999, #dead)))
  end
  local left = #flat / 2 - removed
  setSize(c, n, left)
  if first then redis.call('ZADD', c.idx, fmt(first), n) else redis.call('ZREM', c.idx, n) end
  return removed, #flat / 2
end

-- sweepShard runs one HSCAN step over a spread compact shard (shard_sweep.lua;
-- a self-sized scope's shards are swept by sweepDue) from cursor from (at
-- most about count entries; a listpack shard is returned whole) and deletes
-- the members whose window has passed, checked here, in this script.
-- Returns removed, remaining, the next cursor ("0" once the shard has been
-- walked to its end) and the entries examined; remaining, the shard's size
-- at that instant, is meaningful only when the cursor is "0".
local function sweepShard(key, from, count, win, now)
  local res = redis.call('HSCAN', key, from, 'COUNT', count)
  local cursor, flat = res[1], res[2]
  local dead = {}
  for i = 1, #flat, 2 do
    if age(now, flat[i + 1]) > win then dead[#dead + 1] = flat[i] end
  end
  -- HDEL's replies, not #dead: a field HSCAN returned twice is removed
  -- once; chunks keep unpack within Lua's stack, whatever the listpack limit
  local removed = 0
  for i = 1, #dead, 4000 do
    removed = removed + redis.call('HDEL', key, unpack(dead, i, math.min(i + 3999, #dead)))
  end
  local remaining = 0
  if cursor == '0' then
    if from == '0' then
      -- walked in one step, inside this script: what is left is exact
      remaining = #flat / 2 - removed
    else
      remaining = redis.call('HLEN', key)
    end
  end
  return removed, remaining, cursor, #flat / 2
end

-- size counts a scope's members: live ones (exact, approx) or all stored
-- ones (compact, shards first to last - 1, or, when last is negative, the
-- self-sized scope's meta: expired members leave with the next sweep).
local function size(layout, key, tail, win, first, last, bucket, now)
  if layout == LayoutExact then
    return redis.call('ZCOUNT', key, now - win, '+inf')
  elseif layout == LayoutCompact then
    if last < 0 then return compactState(key, tail).t end
    local n = 0
    for i = first, last - 1 do n = n + redis.call('HLEN', key .. i .. tail) end
    return n
  end
  return redis.call('PFCOUNT', unpack(buckets(key, tail, now - win, now, bucket)))
end

-- finish ends a scope's sweep with its count n: the count key is rewritten
-- and the scope rescheduled, or, once it has been empty for releaseAfter
-- sweeps in a row, its registry entries are removed and true is returned
-- (the caller then deletes the data keys).
local function finish(reg, rel, countKey, ref, n, empties, now, releaseAfter, countTTL, interval)
  if n > 0 or empties + 1 < releaseAfter then
    redis.call('SET', countKey, n .. ':' .. fmt(now), 'PX', countTTL)
    if n > 0 then
      redis.call('HDEL', rel, ref)
    else
      redis.call('HSET', rel, ref, (empties + 1) .. ':0')
    end
    redis.call('ZADD', reg, now + interval, ref)
    return false
  end
  redis.call('DEL', countKey)
  redis.call('ZREM', reg, ref)
  redis.call('HDEL', rel, ref, '#' .. ref)
  return true
end
