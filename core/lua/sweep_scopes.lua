-- sweep_scopes.lua: one bounded step of the sweep of one scope bucket.
-- KEYS[1] the bucket's scope registry  KEYS[2] the bucket's release counters
-- KEYS[3] the bucket's sweep lock
-- ARGV, in the order the engine sends them:
local ARG_NOW = 1           -- now ms or ""
local ARG_LOCK_TOKEN = 2
local ARG_LEASE = 3         -- lock lease ms
local ARG_LIMIT = 4         -- at most this many scopes
local ARG_BUDGET = 5        -- at most about this many entries examined
local ARG_RELEASE_AFTER = 6 -- empty sweeps before release
local ARG_LIFETIME = 7      -- count key lifetime ms
local ARG_BASE = 8          -- the bucket's key base ("P:{sB}:")
local ARG_KIND_EXACT = 9    -- the key kinds of the exact set ("z:"),
local ARG_KIND_SHARD = 10   -- self-sized compact shard ("c:"),
local ARG_KIND_APPROX = 11  -- approx bucket ("x:")
local ARG_KIND_COUNT = 12   -- and count ("n:")
local ARG_CLASSES = 13      -- n, the number of classes; then CLASS_FIELDS each:
local CLASS_NAME = 0
local CLASS_LAYOUT = 1
local CLASS_WINDOW = 2      -- ms
local CLASS_SIZE = 3        -- compact: members a shard holds on average before a split
local CLASS_INTERVAL = 4    -- sweep interval ms
local CLASS_BUCKET = 5      -- approx bucket ms
local CLASS_SPREAD = 6      -- 0/1
local CLASS_FIELDS = 7
-- Returns {now, visited, removed, released, more 0/1, lock, spread}: visited
-- counts the scopes finished in this step (or handed over); lock is
-- "idle", "held" (nothing done) or "ok"; spread holds ref, empty sweeps of
-- each due compact scope whose shards live in other slots: the core sweeps
-- those shards and ends with scope_finish.lua (the scope is claimed for a
-- lock lease meanwhile). Each due scope loses the members whose
-- window has passed (checked and deleted inside this script), gets its count
-- key rewritten, and is released (keys and registry entry deleted) once it
-- has been empty for the given number of sweeps in a row. No step grows with
-- a scope: an exact scope loses at most the entries left in the budget; a
-- compact scope is visited through its due index (scopelib.lua), so only
-- the shards where a window may have passed are read, whole (a shard holds
-- a few hundred members at most), and one with more due shards than the
-- budget allows resumes on the next step, as does one that has shards to
-- merge. Its count is the meta's member total, kept by every script that
-- adds or removes a member in the same slot: exact, whatever the steps.
-- The bound is in entries, not in time, so that a scope that fits in one
-- step is always swept in one.
local now = clock(ARGV[ARG_NOW])
local token, lease = ARGV[ARG_LOCK_TOKEN], tonumber(ARGV[ARG_LEASE])
local limit, budget = tonumber(ARGV[ARG_LIMIT]), tonumber(ARGV[ARG_BUDGET])
local releaseAfter, countTTL, base = tonumber(ARGV[ARG_RELEASE_AFTER]), tonumber(ARGV[ARG_LIFETIME]), ARGV[ARG_BASE]
local kz, kh = ARGV[ARG_KIND_EXACT], ARGV[ARG_KIND_SHARD]
local kx, kn = ARGV[ARG_KIND_APPROX], ARGV[ARG_KIND_COUNT]
local classes = {}
for i = 0, tonumber(ARGV[ARG_CLASSES]) - 1 do
  local a = ARG_CLASSES + 1 + i * CLASS_FIELDS
  classes[ARGV[a + CLASS_NAME]] = { layout = ARGV[a + CLASS_LAYOUT], win = tonumber(ARGV[a + CLASS_WINDOW]),
    size = tonumber(ARGV[a + CLASS_SIZE]), interval = tonumber(ARGV[a + CLASS_INTERVAL]),
    bucket = tonumber(ARGV[a + CLASS_BUCKET]), spread = ARGV[a + CLASS_SPREAD] == '1' }
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
local holder = redis.call('GET', KEYS[3])
if #due == 0 then
  if holder == token then redis.call('DEL', KEYS[3]) end
  return { now, 0, 0, 0, 0, 'idle', {} }
end
if holder and holder ~= token then return { now, 0, 0, 0, 1, 'held', {} } end
redis.call('SET', KEYS[3], token, 'PX', lease)

local visited, removed, released, examined, more = 0, 0, 0, 0, 0
local spread = {}
for _, ref in ipairs(due) do
  if examined >= budget then
    more = 1
    break
  end
  local c = string.find(ref, ':', 1, true)
  local class, id = string.sub(ref, 1, c - 1), string.sub(ref, c + 1)
  local cfg = classes[class]
  local tail = ':' .. id
  -- empty sweeps so far ("empties:0"; older versions kept a walk's state
  -- after it)
  local rel = split(redis.call('HGET', KEYS[2], ref) or '0:0', ':')
  local empties = tonumber(rel[1])
  local done, n, keys = true, 0, {}
  if cfg == nil then
    -- the class is no longer configured: forget the scope
    redis.call('ZREM', KEYS[1], ref)
    redis.call('HDEL', KEYS[2], ref, '#' .. ref)
  elseif cfg.spread then
    visited = visited + 1
    spread[#spread + 1] = ref
    spread[#spread + 1] = empties
    redis.call('ZADD', KEYS[1], now + lease, ref)
    examined = examined + 1
  else
    if cfg.layout == LayoutExact then
      -- the expired members are the lowest ranks: count them, remove at
      -- most the room left, in one command
      local key = base .. kz .. ref
      keys[1] = key
      local room = budget - examined
      local old = redis.call('ZCOUNT', key, '-inf', '(' .. fmt(now - cfg.win))
      local k = math.min(old, room)
      if k > 0 then redis.call('ZREMRANGEBYRANK', key, 0, k - 1) end
      removed, examined = removed + k, examined + k + 1
      if old > room then done = false end
      n = redis.call('ZCARD', key)
    elseif cfg.layout == LayoutCompact then
      -- the shards due in the index, a few at a time, then the merges the
      -- smaller scope calls for; an empty scope of one shard keeps no
      -- meta, so a released one has no key left to delete
      local st = compactState(base .. kh .. class .. ':', tail)
      while done do
        local shards = redis.call('ZRANGEBYSCORE', st.idx, '-inf', now, 'LIMIT', 0, 16)
        if #shards == 0 then break end
        for _, sh in ipairs(shards) do
          if examined >= budget then
            done = false
            break
          end
          local r, seen = sweepDue(st, sh, cfg.win, now)
          removed, examined = removed + r, examined + seen + 1
        end
      end
      while done and shardCount(st) > 1 and st.t * 4 < cfg.size * shardCount(st) do
        if examined >= budget then
          done = false
          break
        end
        if st.t <= 0 then
          -- every shard is empty: one shard again, at once
          st.lv, st.sp, st.p = 0, 0, 1
        else
          examined = examined + mergeShard(st) + 1
        end
      end
      saveState(st)
      n = st.t
      examined = examined + 1
    else
      -- a PFCOUNT merges one HyperLogLog per bucket: weigh it by those
      local prefix = base .. kx .. class .. ':'
      keys = buckets(prefix, tail, now - cfg.win - cfg.bucket, now, cfg.bucket)
      n = size(LayoutApprox, prefix, tail, cfg.win, 0, 0, cfg.bucket, now)
      examined = examined + #keys
    end
    if not done then
      -- resumed where it stopped on the next step, and counted then
      redis.call('HSET', KEYS[2], ref, empties .. ':0')
      redis.call('ZADD', KEYS[1], now, ref)
      more = 1
    else
      visited = visited + 1
    end
    if done and finish(KEYS[1], KEYS[2], base .. kn .. ref, ref, n, empties, now, releaseAfter, countTTL, cfg.interval) then
      if #keys > 0 then redis.call('DEL', unpack(keys)) end
      released = released + 1
    end
  end
end
if more == 0 and #due >= limit then more = 1 end
if more == 0 then redis.call('DEL', KEYS[3]) end
return { now, visited, removed, released, more, 'ok', spread }
