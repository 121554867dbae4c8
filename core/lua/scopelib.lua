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

-- SHARD_SCAN is the most entries a sweep asks one HSCAN step of a compact
-- shard for (COUNT); the core's shardScan is the same for spread shards.
local SHARD_SCAN = 256

-- RECOUNT_SHARDS is the most shards a sweep step counts (HLEN each) when a
-- compact scope's members changed during a walk of several steps: about
-- 0.4 ms of server time.
local RECOUNT_SHARDS = 512

-- sweepShard runs one HSCAN step over a compact shard from cursor from (at
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
-- ones (compact, shards first to last - 1: expired members leave with the
-- next sweep).
local function size(layout, key, tail, win, first, last, bucket, now)
  if layout == '0' then
    return redis.call('ZCOUNT', key, now - win, '+inf')
  elseif layout == '1' then
    local n = 0
    for i = first, last - 1 do n = n + redis.call('HLEN', key .. i .. tail) end
    return n
  end
  return redis.call('PFCOUNT', unpack(buckets(key, tail, now - win, now, bucket)))
end

-- finish ends a scope's sweep with its count n: the count key is rewritten
-- and the scope rescheduled, or, once it has been empty for releaseAfter
-- sweeps in a row, its registry entries are removed and true is returned
-- (the caller then deletes the data keys). When unsure, the sweep could not
-- tell that a scope counted empty is empty, and it does not count as an
-- empty sweep.
local function finish(reg, rel, countKey, ref, n, empties, now, releaseAfter, countTTL, interval, unsure)
  if n > 0 or unsure or empties + 1 < releaseAfter then
    redis.call('SET', countKey, n .. ':' .. fmt(now), 'PX', countTTL)
    if n > 0 then
      redis.call('HDEL', rel, ref)
    elseif unsure then
      redis.call('HSET', rel, ref, empties .. ':0')
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
