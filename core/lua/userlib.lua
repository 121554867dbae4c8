-- userlib.lua: the users' rules (device state, aggregation, debounce) and
-- the reading and writing of a user's records, shared by the user scripts:
-- the core prepends this file (after recordlib.lua) to each of them but
-- heartbeat_steady.lua, so every script stays self-contained for EVAL.
--
-- ARGV common to every user script (read by params, P below), in the
-- order the engine sends them (userArgs; TestLuaArgNames holds the two
-- together). A script's own ARGV start at ARG_OWN. Named numbers like
-- these (top-level locals in capitals) reach Redis written as numbers
-- (inlineConstants in scripts.go), so that naming them costs no script
-- anything.
local ARG_NOW = 1      -- now in ms since the epoch, or "" to read the server's TIME
local ARG_IDLE = 2     -- IdleAfter ms
local ARG_PUSH = 3     -- PushWindow ms
local ARG_LEAVE = 4    -- LeaveDelay ms
local ARG_COALESCE = 5 -- CoalesceWindow ms (0: publish at once)
local ARG_GRACE = 6    -- key grace ms (session keys live this long past the last window)
local ARG_DPRE = 7     -- prefix of the device-hash keys of this bucket ("P:{uB}:d:")
local ARG_MAXDEV = 8   -- MaxDevices
local ARG_SKEW = 9     -- MaxSkew ms
local ARG_POLICY = 10  -- the engine's login policy (POLICY_*)
local ARG_COUNTS = 11  -- the bucket's counts hash (P:{uB}:cnt): published status → users
local ARG_KICK = 12    -- KickFence ms (the fence: recordlib.lua)
local ARG_OUTBOX = 13  -- the bucket's outbox hash (P:{uB}:ob, emit below)
local ARG_OWN = 14

-- Statuses (docs/design.md §6), as the engine numbers them (core.Status).
local OFFLINE = 0
local PUSH_ONLINE = 1
local AWAY = 2
local ONLINE = 3
local DND = 4

-- Manual statuses (core.Manual).
local MANUAL_NONE = 0
local MANUAL_DND = 1
local MANUAL_INVISIBLE = 2

-- Login policies (core.Policy).
local POLICY_MULTI = 0
local POLICY_EXCLUSIVE = 1
local POLICY_PER_KIND = 2

-- The flags of a dynamic record (recordlib.lua), added together.
local FLAG_GONE = 1
local FLAG_FENCED = 2

local function split(s, sep)
  local out, i = {}, 1
  while true do
    local j = string.find(s, sep, i, true)
    if not j then
      out[#out + 1] = string.sub(s, i)
      return out
    end
    out[#out + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end

-- Compact shards keep a member's last touch modulo 2^31 ms (about 24.8
-- days): it fits listpack's 32-bit integers (5 bytes, where a full instant
-- takes 9), and an age stays exact while under half of that, which the
-- bound on a compact class's window (maxCompactWindow in config.go) keeps.
local WRAP = 2147483648
local function stamp(now) return fmt(now % WRAP) end

-- age is how long ago stamp v was taken, in ms: negative for a stamp of a
-- slightly later clock.
local function age(now, v)
  local a = (now - v) % WRAP
  if a >= WRAP / 2 then a = a - WRAP end
  return a
end

-- Numbers are parsed by arithmetic (x + 0), where tonumber parses a string
-- twice (strtod), the costliest step of reading a user. Every field parsed
-- so is one the scripts or the engine wrote as a number.

-- num formats a whole number as fmt does, but the small ones every state
-- entry holds (statuses, manual modes, zero) come from a table, because a
-- string.format costs more than a user's other formatting. The table lives
-- here, not in recordlib.lua, which the steady beat would build it in on
-- every call.
local SMALL = { [0] = '0', '1', '2', '3', '4' }
local function num(n) return SMALL[n] or fmt(n) end

-- params reads the common ARGV; a script that has read the clock already
-- passes its instant (now, and nows, its decimal string), so that every
-- part of one call sees the same one.
local function params(now, nows)
  if not now then
    now = clock(ARGV[ARG_NOW])
    nows = ARGV[ARG_NOW]
    if nows == '' then nows = fmt(now) end
  end
  return {
    now = now, nows = nows, idle = ARGV[ARG_IDLE] + 0, push = ARGV[ARG_PUSH] + 0,
    leave = ARGV[ARG_LEAVE] + 0, coalesce = ARGV[ARG_COALESCE] + 0, grace = ARGV[ARG_GRACE] + 0,
    dpre = ARGV[ARG_DPRE], maxdev = ARGV[ARG_MAXDEV] + 0, skew = ARGV[ARG_SKEW] + 0,
    policy = ARGV[ARG_POLICY] + 0, cnt = ARGV[ARG_COUNTS], kick = ARGV[ARG_KICK] + 0,
    ob = ARGV[ARG_OUTBOX],
  }
end

local function decode(static, dynamic)
  local kind, gw, token, login, iv, meta = string.match(static, STATIC_FIELDS)
  local seen, active, bg, flags = string.match(dynamic, DYNAMIC_FIELDS)
  flags = flags + 0
  return {
    kind = kind, gw = gw, token = token, login = login + 0, iv = iv + 0, meta = meta or '',
    seen = seen + 0, active = active + 0, bg = bg == '1',
    gone = flags % 2 == FLAG_GONE, fenced = flags >= FLAG_FENCED,
  }
end

local function encodeStatic(r)
  return table.concat({ r.kind, r.gw, r.token, fmt(r.login), fmt(r.iv), r.meta }, US)
end

local function encodeDynamic(r)
  local flags = (r.gone and FLAG_GONE or 0) + (r.fenced and FLAG_FENCED or 0)
  return table.concat({ fmt(r.seen), fmt(r.active), r.bg and '1' or '0', num(flags) }, US)
end

local function window(r, P)
  if r.bg then return P.push end
  return 2 * r.iv
end

-- deadline is the last instant at which the device is alive, or for a
-- gone (logged-out) record the last instant its token stays refused.
local function deadline(r, P)
  if r.gone then return r.active end
  return r.seen + window(r, P)
end

local function state(r, now, P)
  if r.gone or now > deadline(r, P) then return OFFLINE end
  if r.bg then return PUSH_ONLINE end
  if now - r.active >= P.idle then return AWAY end
  return ONLINE
end

-- load reads a user's devices, fences, manual status and published state.
-- Records whose window has passed, and fence fields that have ended, are
-- marked for deletion (compare-and-delete: the check and the delete happen
-- inside one script). u.fences holds each device's fence in force, whether
-- its record implies it or a field of its own says it (u.fenceRaw: the
-- fields as stored, which store compares against).
local function load(user, st, P)
  local u = { user = user, dkey = P.dpre .. user, devs = {}, fences = {}, fenceRaw = {},
    manual = MANUAL_NONE, mexp = 0, pub = OFFLINE, pend = nil, due = 0, idx = nil, raw = false,
    steadyRaw = false, dirty = {}, seen = {} }
  local flat = redis.call('HGETALL', u.dkey)
  local static, dynamic = {}, {}
  for i = 1, #flat, 2 do
    -- the field's first byte tells its kind: DYN, FENCE, STEADY or a device ID
    local b = string.byte(flat[i], 1)
    if b == 1 then
      dynamic[string.sub(flat[i], 2)] = flat[i + 1]
    elseif b == 2 then
      local id = string.sub(flat[i], 2)
      u.fenceRaw[id] = flat[i + 1]
      local fin, token = string.match(flat[i + 1], '^([^\031]*)\031(.*)$')
      fin = fin + 0
      if P.now <= fin then u.fences[id] = { fin = fin, token = token } end
    elseif b == 3 then
      u.steadyRaw = flat[i + 1]
    else
      static[flat[i]] = flat[i + 1]
    end
  end
  for id, s in pairs(static) do
    local r = decode(s, dynamic[id] or '0\0310\0310\0311')
    if r.fenced then
      -- the fence the record's session start set, while the record is
      -- stored (a field of the device's, if any, was written by that start
      -- too)
      local fin = r.login + P.kick
      local f = u.fences[id]
      if f and f.fin > fin then fin = f.fin end
      if P.now <= fin then u.fences[id] = { fin = fin, token = r.token } end
    end
    if P.now > deadline(r, P) then
      u.dirty[id] = false
    else
      u.devs[id] = r
    end
  end
  local s = redis.call('HGET', st, user)
  if s then
    u.raw = s
    local pub, pend, due, manual, mexp, idx = string.match(s, STATE_FIELDS)
    u.pub = pub + 0
    if pend ~= '' then u.pend, u.due = pend + 0, due + 0 end
    u.manual, u.mexp = manual + 0, mexp + 0
    if idx ~= '' then u.idx = idx + 0 end
    if u.mexp > 0 and P.now >= u.mexp then u.manual, u.mexp = 0, 0 end
  end
  return u
end

local function live(u, P)
  local n = 0
  for _, r in pairs(u.devs) do
    if state(r, P.now, P) ~= OFFLINE then n = n + 1 end
  end
  return n
end

-- aggregate is the status others see (docs/design.md §6).
local function aggregate(u, P)
  local best = OFFLINE
  for _, r in pairs(u.devs) do
    local s = state(r, P.now, P)
    if s > best then best = s end
  end
  if best == OFFLINE then return OFFLINE end
  if u.manual == MANUAL_DND then return DND end
  if u.manual == MANUAL_INVISIBLE then return OFFLINE end
  return best
end

-- observe applies the debounce of docs/design.md §7 and returns the
-- published change {from, to}, or nil. cause: 'change', 'leave' (disconnect
-- or expiry: OFFLINE waits LeaveDelay from now, when it is seen, so that a
-- sweep that comes late, or a clock that steps, gives heartbeats their
-- chance) or 'logout'.
local function observe(u, cur, cause, P)
  local now = P.now
  if cur == u.pub then
    u.pend, u.due = nil, 0
    return nil
  end
  if cause == 'logout' and cur == OFFLINE then
    u.due = now
  elseif u.pend == cur then
    -- the same change is already waiting: keep its due time
  elseif cur == OFFLINE and cause == 'leave' then
    u.due = now + P.leave
  elseif u.pend ~= nil then
    u.due = math.min(u.due, now + P.coalesce)
  else
    u.due = now + P.coalesce
  end
  u.pend = cur
  if now >= u.due then
    local from = u.pub
    u.pub, u.pend, u.due = cur, nil, 0
    return { from, cur }
  end
  return nil
end

-- store writes back the dirty device records and fences, the key expiry
-- (the latest deadline or fence end, plus the grace), and the user state.
-- A device's fence field is kept only when its fence says more than the
-- device's record as stored now implies (the record is gone, or set no
-- fence, or holds another token, or its fence ends later). The due index
-- is written only when the user must be visited sooner than its score says
-- (or its score has passed): a score left early costs the sweeper one visit that
-- re-indexes, and saves a write per beat. A fence needs no visit: it only
-- refuses tokens, and the key's expiry covers it.
local function store(u, st, due, P)
  local now = P.now
  local dels = {} -- fields of the device hash to delete, in one HDEL at the end
  for id, r in pairs(u.dirty) do
    if r == false then
      dels[#dels + 1] = id
      dels[#dels + 1] = DYN .. id
    else
      redis.call('HSET', u.dkey, id, encodeStatic(r), DYN .. id, encodeDynamic(r))
    end
  end
  for id, r in pairs(u.seen) do
    if u.dirty[id] == nil then redis.call('HSET', u.dkey, DYN .. id, encodeDynamic(r)) end
  end
  for id, f in pairs(u.fences) do
    local r, want = u.devs[id], false
    if not (r and r.fenced and r.token == f.token and r.login + P.kick >= f.fin) then want = fmt(f.fin) .. US .. f.token end
    if want and want ~= u.fenceRaw[id] then redis.call('HSET', u.dkey, FENCE .. id, want) end
    if not want and u.fenceRaw[id] then dels[#dels + 1] = FENCE .. id end
  end
  for id, _ in pairs(u.fenceRaw) do
    if u.fences[id] == nil then dels[#dels + 1] = FENCE .. id end
  end
  local last, nxt = nil, nil
  local function take(t)
    if t > now and (nxt == nil or t < nxt) then nxt = t end
  end
  for _, r in pairs(u.devs) do
    local d = deadline(r, P)
    if last == nil or d > last then last = d end
    if not r.gone then
      take(d + 1)
      if not r.bg then take(r.active + P.idle) end
    end
  end
  for _, f in pairs(u.fences) do
    if last == nil or f.fin > last then last = f.fin end
  end
  if last ~= nil then redis.call('PEXPIRE', u.dkey, last - now + P.grace) end
  if u.mexp > 0 and live(u, P) > 0 then take(u.mexp) end
  if u.pend ~= nil then take(u.due) end
  if nxt == nil then
    if u.idx ~= nil then redis.call('ZREM', due, u.user) end
    u.idx = nil
  end
  -- the score as a string, formatted once for the index, the state entry
  -- and the steady copy
  local idxs = ''
  if nxt ~= nil and (u.idx == nil or nxt < u.idx or u.idx <= now) then
    idxs = fmt(nxt)
    redis.call('ZADD', due, idxs, u.user)
    u.idx = nxt
  elseif u.idx ~= nil then
    idxs = fmt(u.idx)
  end
  local raw = false
  if u.pub ~= OFFLINE or u.pend ~= nil or u.manual ~= MANUAL_NONE or u.idx ~= nil then
    local p = ''
    if u.pend ~= nil then p = num(u.pend) end
    raw = stateEntry(num(u.pub), p, num(u.due), num(u.manual), num(u.mexp), idxs)
  end
  if raw ~= u.raw then
    if raw then redis.call('HSET', st, u.user, raw) else redis.call('HDEL', st, u.user) end
  end
  -- the steady beat's copy of the score (recordlib.lua): a score without a
  -- pending change comes from a live record, so the copy is only written on
  -- a key that holds one, and has the expiry set above
  local copy = false
  if u.pend == nil and u.idx ~= nil then copy = idxs end
  if copy ~= u.steadyRaw then
    if copy then redis.call('HSET', u.dkey, STEADY, copy) else dels[#dels + 1] = STEADY end
  end
  if #dels > 0 then redis.call('HDEL', u.dkey, unpack(dels)) end
end

-- emit records an event in the bucket's outbox (docs/design.md §7), in
-- the script that decides it, and returns its ID: TAG.EPOCH.SEQ, where TAG
-- is the bucket's hash tag (u0, u1, ...), SEQ
-- counts the outbox's events and EPOCH is the instant the counter started,
-- so that a counter restarted (the key expired, or Redis restarted empty)
-- never repeats an ID a reader may still remember. The entry is kind,
-- then the event's fields, joined by US; the engine deletes it once the
-- event is delivered (outbox_ack.lua), a sweep delivers what is left
-- (sweep_users.lua). Past OUTBOX_MAX entries, the oldest goes: an outbox
-- that large means nothing delivers (no sweeper, no engine) for long.
local OUTBOX_MAX = 4096
local OUTBOX_TTL = 86400000 -- ms an outbox outlives its last event
local function emit(P, kind, fields)
  local h = redis.call('HMGET', P.ob, '#', '@')
  local seq, epoch = tonumber(h[1] or '0') + 1, h[2]
  if not epoch then epoch = P.nows end
  local id = string.match(P.ob, '{([^}]*)}') .. '.' .. epoch .. '.' .. fmt(seq)
  redis.call('HSET', P.ob, '#', fmt(seq), '@', epoch, fmt(seq), kind .. US .. table.concat(fields, US))
  if seq > OUTBOX_MAX then redis.call('HDEL', P.ob, fmt(seq - OUTBOX_MAX)) end
  redis.call('PEXPIRE', P.ob, OUTBOX_TTL)
  return id
end

-- settle observes the user's current status and stores everything; a
-- published change goes to the outbox and is appended to events as user,
-- from, to, outbox ID.
local function settle(u, cause, st, due, P, events)
  local ev = observe(u, aggregate(u, P), cause, P)
  store(u, st, due, P)
  if ev then
    -- the counts follow the published statuses, in the same script
    if ev[1] ~= OFFLINE then redis.call('HINCRBY', P.cnt, ev[1], -1) end
    if ev[2] ~= OFFLINE then redis.call('HINCRBY', P.cnt, ev[2], 1) end
    events[#events + 1] = u.user
    events[#events + 1] = ev[1]
    events[#events + 1] = ev[2]
    events[#events + 1] = emit(P, 'c', { u.user, num(ev[1]), num(ev[2]), P.nows })
  end
end

local function set(u, id, r)
  u.devs[id] = r
  u.dirty[id] = r
end

-- seen records that only the dynamic part of a record changed.
local function seen(u, id, r)
  u.devs[id] = r
  u.seen[id] = r
end

local function drop(u, id)
  u.devs[id] = nil
  u.dirty[id] = false
end

-- fence refuses, until fin, every token of device id but token ("" none);
-- a fence already in force keeps its later end, so none is ever shortened.
local function fence(u, id, fin, token)
  local f = u.fences[id]
  if f and f.fin > fin then fin = f.fin end
  u.fences[id] = { fin = fin, token = token }
end
