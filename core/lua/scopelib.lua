-- scopelib.lua: helpers shared by the scope scripts (appended after lib.lua).

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
  redis.call('HDEL', rel, ref)
  return true
end
