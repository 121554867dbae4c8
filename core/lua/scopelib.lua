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
-- ones (compact: expired members leave with the next sweep).
local function size(layout, key, tail, win, shards, bucket, now)
  if layout == '0' then
    return redis.call('ZCOUNT', key, now - win, '+inf')
  elseif layout == '1' then
    local n = 0
    for i = 0, shards - 1 do n = n + redis.call('HLEN', key .. i .. tail) end
    return n
  end
  return redis.call('PFCOUNT', unpack(buckets(key, tail, now - win, now, bucket)))
end
