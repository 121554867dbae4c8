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
local ARG_KIND_SHARD = 10   -- compact shard ("h:"),
local ARG_KIND_APPROX = 11  -- approx bucket ("x:")
local ARG_KIND_COUNT = 12   -- and count ("n:")
local ARG_CLASSES = 13      -- n, the number of classes; then CLASS_FIELDS each:
local CLASS_NAME = 0
local CLASS_LAYOUT = 1
local CLASS_WINDOW = 2      -- ms
local CLASS_SHARDS = 3
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
-- a scope: an exact scope loses at most the entries left in the budget, a
-- compact scope is walked shard by shard in HSCAN steps of at most
-- SHARD_SCAN entries, and one too large for a step resumes where it stopped
-- (shard, HSCAN cursor) on the next step. Such a walk sums the shards as it
-- goes; when it ends it takes the sum for the count if no touch or leave
-- changed the scope's members meanwhile (they count changes in KEYS[2],
-- field "#ref"), else counts every shard again (up to RECOUNT_SHARDS) or
-- keeps the sum without counting the sweep as an empty one. The bound is in entries, not in
-- time, so that a scope that fits in one step is always swept in one.
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
    shards = tonumber(ARGV[a + CLASS_SHARDS]), interval = tonumber(ARGV[a + CLASS_INTERVAL]),
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
  -- empty sweeps so far and, while a compact walk is unfinished, where it
  -- resumes (shard, HSCAN cursor in it), the sum of the shards walked and
  -- the scope's member changes ("#ref") when it began: "empties:0" when no
  -- walk is unfinished
  local rel = split(redis.call('HGET', KEYS[2], ref) or '0:0', ':')
  local empties, cursor, scan = tonumber(rel[1]), tonumber(rel[2]), rel[3]
  local walking = scan ~= nil
  if not walking then cursor, scan = 0, '0' end
  local done, n, keys, unsure, walk = true, 0, {}, false, '0'
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
    if cfg.layout == '0' then
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
    elseif cfg.layout == '1' then
      -- shard by shard, one HSCAN step at a time, so that neither the
      -- number of shards nor a shard's size makes a step long. A released
      -- scope's shards are empty, so they no longer exist: nothing to
      -- delete.
      local prefix = base .. kh .. class .. ':'
      local sum, changes = tonumber(rel[4] or 0), rel[5]
      while cursor < cfg.shards do
        if examined >= budget then
          done = false
          break
        end
        local r, left, nxt, seen = sweepShard(prefix .. cursor .. tail, scan,
          math.min(SHARD_SCAN, budget - examined), cfg.win, now)
        removed, examined, scan = removed + r, examined + seen + 1, nxt
        if nxt == '0' then cursor, sum = cursor + 1, sum + left end
      end
      if not done then
        -- the walk goes on in later steps: what touch and leave count from
        -- now on, a shard walked earlier may have gained or lost
        if not walking then changes = redis.call('HGET', KEYS[2], '#' .. ref) or '0' end
        walk = cursor .. ':' .. scan .. ':' .. sum .. ':' .. changes
      elseif not walking or (redis.call('HGET', KEYS[2], '#' .. ref) or '0') == changes then
        -- walked in this script, or no member came or left since the walk
        -- began: the sum is the scope's size now
        n = sum
      elseif cfg.shards <= RECOUNT_SHARDS then
        n = size('1', prefix, tail, cfg.win, 0, cfg.shards, 0, now)
      else
        -- too many shards to count in one step: the sum misses at most
        -- the changes made during the walk, and this sweep does not count
        -- as an empty one
        n, unsure = sum, true
      end
    else
      -- a PFCOUNT merges one HyperLogLog per bucket: weigh it by those
      local prefix = base .. kx .. class .. ':'
      keys = buckets(prefix, tail, now - cfg.win - cfg.bucket, now, cfg.bucket)
      n = size('2', prefix, tail, cfg.win, 0, 0, cfg.bucket, now)
      examined = examined + #keys
    end
    if not done then
      -- resumed where it stopped on the next step, and counted then
      redis.call('HSET', KEYS[2], ref, empties .. ':' .. walk)
      redis.call('ZADD', KEYS[1], now, ref)
      more = 1
    else
      visited = visited + 1
    end
    if done and finish(KEYS[1], KEYS[2], base .. kn .. ref, ref, n, empties, now, releaseAfter, countTTL, cfg.interval, unsure) then
      if #keys > 0 then redis.call('DEL', unpack(keys)) end
      released = released + 1
    end
  end
end
if more == 0 and #due >= limit then more = 1 end
if more == 0 then redis.call('DEL', KEYS[3]) end
return { now, visited, removed, released, more, 'ok', spread }
