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
-- anything. KEYS of every user script: the bucket's meta, due index, big
-- hash and manual hash (recordlib.lua), then the script's own.
local ARG_NOW = 1      -- now in ms since the epoch, or "" to read the server's TIME
local ARG_IDLE = 2     -- IdleAfter ms
local ARG_PUSH = 3     -- PushWindow ms
local ARG_LEAVE = 4    -- LeaveDelay ms
local ARG_COALESCE = 5 -- CoalesceWindow ms (0: publish at once)
local ARG_KEEP = 6     -- ms a page or the big hash lives past its last write (recordlib.lua)
local ARG_PAGES = 7    -- prefix of the page keys of this bucket ("P:{uB}:p:")
local ARG_MAXDEV = 8   -- MaxDevices
local ARG_SKEW = 9     -- MaxSkew ms
local ARG_POLICY = 10  -- the engine's login policy (core.Policy)
local ARG_COUNTS = 11  -- the bucket's counts hash (P:{uB}:cnt): published status → users
local ARG_KICK = 12    -- KickFence ms (the fence: recordlib.lua)
local ARG_OUTBOX = 13  -- the bucket's outbox hash (P:{uB}:ob, emit below)
local ARG_HEAL = 14    -- ms a bucket heals after a loss (layout below), or 0 when the engine has
                       -- not seen the bucket yet, so that a missing meta is no loss to it
local ARG_OWN = 15

-- The bytes that mark a static record's manual expiry, a fence item and
-- the end of a field (recordlib.lua).
local MANUAL_EXPIRES_BYTE = string.byte(MANUAL_EXPIRES)
local FENCE_BYTE = string.byte(FENCE)
local US_BYTE = string.byte(US)

-- The bits of a device's item (recordlib.lua), added together.
local BIT_BACKGROUND = 1
local BIT_GONE = 2
local BIT_FENCED = 4

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

-- instant formats instant n as fmt does, once per call: a call's
-- instants repeat (now, now + LeaveDelay), and a format costs more than
-- anything else a sweep does for an expired device.
local function instant(P, n)
  local s = P.fmts[n]
  if not s then
    s = fmt(n)
    P.fmts[n] = s
  end
  return s
end

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
    now = now, nows = nows, fmts = {}, idle = ARGV[ARG_IDLE] + 0, push = ARGV[ARG_PUSH] + 0,
    leave = ARGV[ARG_LEAVE] + 0, coalesce = ARGV[ARG_COALESCE] + 0, keep = ARGV[ARG_KEEP],
    pages = ARGV[ARG_PAGES], maxdev = ARGV[ARG_MAXDEV] + 0, skew = ARGV[ARG_SKEW] + 0,
    policy = ARGV[ARG_POLICY] + 0, cnt = ARGV[ARG_COUNTS], kick = ARGV[ARG_KICK] + 0,
    ob = ARGV[ARG_OUTBOX], heal = ARGV[ARG_HEAL] + 0, meta = KEYS[1], due = KEYS[2], big = KEYS[3],
    man = KEYS[4], healing = false, lost = '-',
  }
end


-- The fields of a device's static and dynamic items, and of a fence's
-- (recordlib.lua).
local STATIC_ITEM = '^([^\031]*)\031([0-7])\031([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)\031?(.*)$'
local DYNAMIC_ITEM = '^([^\031]*)\031(.*)$'
local FENCE_ITEM = '^\002([^\031]*)\031([^\031]*)\031(.*)$'

-- decodeItem reads a device's items: its ID and record.
local function decodeItem(static, dynamic)
  local id, bits, kind, gw, token, iv, login, meta = string.match(static, STATIC_ITEM)
  local seen, da = string.match(dynamic, DYNAMIC_ITEM)
  seen, bits = unhex(seen), bits + 0
  return id, {
    kind = kind, gw = gw, token = token, login = unhex(login), iv = iv + 0, meta = meta,
    seen = seen, active = seen - da, bg = bits % 2 == BIT_BACKGROUND,
    gone = bits % 4 >= BIT_GONE, fenced = bits >= BIT_FENCED,
  }
end

-- encodeItem writes device id's static and dynamic items.
local function encodeItem(id, r)
  local bits = (r.bg and BIT_BACKGROUND or 0) + (r.gone and BIT_GONE or 0) + (r.fenced and BIT_FENCED or 0)
  local static = id .. US .. num(bits) .. US .. r.kind .. US .. r.gw .. US .. r.token .. US .. fmt(r.iv) .. US .. hex(r.login)
  if r.meta ~= '' then static = static .. US .. r.meta end
  return static, hex(r.seen) .. US .. num(r.seen - r.active)
end

-- deadlineOf is the last instant at which a device is alive, or for a
-- gone (logged-out) record the last instant its token stays refused.
local function deadlineOf(loggedOut, bg, iv, seen, active, P)
  if loggedOut then return active end
  if bg then return seen + P.push end
  return seen + 2 * iv
end

local function deadline(r, P) return deadlineOf(r.gone, r.bg, r.iv, r.seen, r.active, P) end

-- The fields of a device's items that its deadline needs: bits and
-- interval; lastSeen and lastSeen - lastActive.
local EXPIRY_STATIC = '^[^\031]*\031([0-7])\031[^\031]*\031[^\031]*\031[^\031]*\031(%d+)\031'
local EXPIRY_DYNAMIC = '^(%x+)\031(%-?%d+)$'

-- gone tells, from a device's items, whether the device is past its
-- deadline and its record implies no fence, so that a sweep may settle a
-- user whose only device it is without a load (settleGone). It costs
-- most of what decodeItem does, so a load does not ask it first: most
-- devices a load reads are live. The items may start inside their strings, at
-- si and di.
local function gone(static, dynamic, P, si, di)
  local bits, iv = string.match(static, EXPIRY_STATIC, si)
  bits = bits + 0
  if bits >= BIT_FENCED then return false end
  local seen, da = string.match(dynamic, EXPIRY_DYNAMIC, di)
  seen = unhex(seen)
  return P.now > deadlineOf(bits % 4 >= BIT_GONE, bits % 2 == BIT_BACKGROUND, iv + 0, seen, seen - da, P)
end

local function state(r, now, P)
  if r.gone or now > deadline(r, P) then return StatusOffline end
  if r.bg then return StatusPushOnline end
  if now - r.active >= P.idle then return StatusAway end
  return StatusOnline
end


-- emit records an event in the bucket's outbox (docs/design.md §7), in
-- the script that decides it, and returns its ID: TAG.EPOCH.SEQ, where TAG
-- is the bucket's hash tag (u0, u1, ...), SEQ
-- counts the outbox's events and EPOCH is the instant the counter started,
-- so that a counter restarted (the key expired, or Redis restarted empty)
-- never repeats an ID a reader may still remember. The entry (built by
-- the caller, one concatenation) is kind, then the event's fields, joined
-- by US; the engine deletes it once the
-- event is delivered (outbox_ack.lua), a sweep delivers what is left
-- (sweep_users.lua). Past OUTBOX_MAX entries, the oldest goes: an outbox
-- that large means nothing delivers (no sweeper, no engine) for long.
local OUTBOX_MAX = 4096
local OUTBOX_TTL = 86400000 -- ms an outbox outlives its last event
local function emit(P, entry)
  local B = P.batch
  local seq, epoch
  if B and B.seq then
    seq, epoch = B.seq + 1, B.epoch
  else
    local h = redis.call('HMGET', P.ob, '#', '@')
    seq, epoch = tonumber(h[1] or '0') + 1, h[2]
    if not epoch then epoch = P.nows end
  end
  if not P.obTag then P.obTag = string.match(P.ob, '{([^}]*)}') end
  local seqs = fmt(seq)
  local id = P.obTag .. '.' .. epoch .. '.' .. seqs
  if B then
    B.seq, B.epoch = seq, epoch
    B.ob[#B.ob + 1] = seqs
    B.ob[#B.ob + 1] = entry
    return id
  end
  redis.call('HSET', P.ob, '#', seqs, '@', epoch, seqs, entry)
  if seq > OUTBOX_MAX then redis.call('HDEL', P.ob, fmt(seq - OUTBOX_MAX)) end
  redis.call('PEXPIRE', P.ob, OUTBOX_TTL)
  return id
end

-- layout reads the bucket's page level and split pointer from meta once
-- per call, and checks its layout: a bucket without meta holds no user
-- record of this layout, so a due index or counts hash there belongs to
-- another one. write: create meta when the bucket has none (reads never
-- write).
-- Meta is also the bucket's marker of a data loss (docs/design.md §11): it
-- never expires, so a bucket the engine has seen (ARG_HEAL > 0) and whose
-- meta is gone has lost its data. The script that finds so records the
-- loss in the bucket's outbox (P.lost, which the script returns last: the
-- healing's end US its outbox ID; "" when meta was there or made without a
-- loss; "-" when the script did not look) and marks the bucket as healing for
-- ARG_HEAL ms (meta's h): every device beats within that time, and while
-- it lasts no change is published (settle, announce), because the status
-- a user had before the loss is unknown and most come back as they were.
local function layout(P, write)
  if P.level then return end
  local m = redis.call('HMGET', P.meta, 'v', 'L', 's', 'h')
  if m[1] then
    if m[1] ~= LAYOUT then layoutError(m[1]) end
    P.level, P.split, P.lost = m[2] + 0, m[3] + 0, ''
    if m[4] and P.now < m[4] + 0 then P.healing = true end
    return
  end
  if redis.call('EXISTS', P.due, P.cnt) > 0 then layoutError('1') end
  P.level, P.split = 0, 0
  if not write then return end
  if P.heal > 0 then
    local fin = fmt(P.now + P.heal)
    redis.call('HSET', P.meta, 'v', LAYOUT, 'L', '0', 's', '0', 'h', fin)
    P.healing = true
    P.lost = fin .. US .. emit(P, 'l' .. US .. fin .. US .. P.nows)
  else
    redis.call('HSET', P.meta, 'v', LAYOUT, 'L', '0', 's', '0')
    P.lost = ''
  end
end

-- load reads a user's records and manual status (rec, dyn and where: the
-- records and their key, when the caller has read them already; page:
-- where's number, when where is the user's page). Records whose
-- window has passed, and fences that have ended, are left out, so that
-- store deletes them (compare-and-delete: the check and the delete happen
-- inside one script). u.fences holds each device's fence in force, whether
-- its record implies it or an item of its own says it.
local function load(user, P, rec, dyn, where, page)
  layout(P, true)
  local u = { user = user, devs = {}, fences = {}, manual = ManualNone, mexp = 0, pub = StatusOffline,
    pend = nil, due = 0, raw = false, dynRaw = false, manRaw = false, where = where, page = page }
  if not page then u.page = pageOf(hashOf(user), P.level, P.split) end
  if not rec then
    local pk = P.pages .. u.page
    local got = redis.call('HMGET', pk, user, DYN .. user)
    if got[1] then
      u.where = pk
    else
      got = redis.call('HMGET', P.big, user, DYN .. user)
      if got[1] then u.where = P.big end
    end
    rec, dyn = got[1], got[2]
  end
  if rec then
    u.raw, u.dynRaw = rec, dyn or ''
    local items, dyns = split(rec, IS), split(dyn or US, IS)
    u.pub = string.byte(items[1], 1) - 48
    local pend, due = string.match(dyns[1], '^([^\031]*)\031(.*)$')
    if pend ~= '' then u.pend, u.due = pend + 0, due + 0 end
    -- fences first: a fenced record's own fence then takes the later end
    -- of the two, with the record's token (the session start set both)
    for i = 2, #items do
      if string.byte(items[i], 1) == FENCE_BYTE then
        local id, fin, token = string.match(items[i], FENCE_ITEM)
        fin = fin + 0
        if P.now <= fin then u.fences[id] = { fin = fin, token = token } end
      end
    end
    local d = 0
    for i = 2, #items do
      if string.byte(items[i], 1) ~= FENCE_BYTE then
        d = d + 1
        local id, r = decodeItem(items[i], dyns[d + 1])
        if r.fenced then
          local fin = r.login + P.kick
          local f = u.fences[id]
          if f and f.fin > fin then fin = f.fin end
          if P.now <= fin then u.fences[id] = { fin = fin, token = r.token } end
        end
        if P.now <= deadline(r, P) then u.devs[id] = r end
      end
    end
  end
  local m
  if P.batch then m = P.batch.manual[user] else m = redis.call('HGET', P.man, user) end
  if m then
    u.manRaw = m
    local manual, mexp = string.match(m, '^([^\031]*)\031(.*)$')
    u.manual, u.mexp = manual + 0, mexp + 0
    if u.mexp > 0 and P.now >= u.mexp then u.manual, u.mexp = 0, 0 end
  end
  return u
end

local function live(u, P)
  local n = 0
  for _, r in pairs(u.devs) do
    if state(r, P.now, P) ~= StatusOffline then n = n + 1 end
  end
  return n
end

-- aggregate is the status others see (docs/design.md §6).
local function aggregate(u, P)
  local best = StatusOffline
  for _, r in pairs(u.devs) do
    local s = state(r, P.now, P)
    if s > best then best = s end
  end
  if best == StatusOffline then return StatusOffline end
  if u.manual == ManualDND then return StatusDND end
  if u.manual == ManualInvisible then return StatusOffline end
  return best
end

-- observe applies the debounce of docs/design.md §7 and returns the
-- published change as two values, from and to, or nothing. cause: 'change', 'leave' (disconnect
-- or expiry: OFFLINE waits LeaveDelay from now, when it is seen, so that a
-- sweep that comes late, or a clock that steps, gives heartbeats their
-- chance) or 'logout'.
local function observe(u, cur, cause, P)
  local now = P.now
  if cur == u.pub then
    u.pend, u.due = nil, 0
    return nil
  end
  if cause == 'logout' and cur == StatusOffline then
    u.due = now
  elseif u.pend == cur then
    -- the same change is already waiting: keep its due time
  elseif cur == StatusOffline and cause == 'leave' then
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
    return from, cur
  end
  return nil
end

-- splitPage splits page s in two, as linear hashing does: its users whose
-- hash says so move to page s + 2^L, both pages are written afresh (a page
-- turned hashtable becomes a listpack again), and s moves on. The new page
-- inherits the old one's due score, early for it but never late.
local function splitPage(P)
  local n = 2 ^ P.level
  local from, to = P.pages .. P.split, P.pages .. fmt(P.split + n)
  local flat = redis.call('HGETALL', from)
  local stay, move = {}, {}
  for i = 1, #flat, 2 do
    local user = flat[i]
    if string.byte(user, 1) == 1 then user = string.sub(user, 2) end
    local t = stay
    if hashOf(user) % (2 * n) ~= P.split then t = move end
    t[#t + 1] = flat[i]
    t[#t + 1] = flat[i + 1]
  end
  redis.call('DEL', from)
  if #stay > 0 then
    redis.call('HSET', from, unpack(stay))
    redis.call('PEXPIRE', from, P.keep)
  end
  if #move > 0 then
    redis.call('HSET', to, unpack(move))
    redis.call('PEXPIRE', to, P.keep)
    local score = redis.call('ZSCORE', P.due, PAGE .. P.split)
    if score then redis.call('ZADD', P.due, score, PAGE .. fmt(P.split + n)) end
  end
  P.split = P.split + 1
  if P.split == n then P.level, P.split = P.level + 1, 0 end
  redis.call('HSET', P.meta, 'L', fmt(P.level), 's', fmt(P.split))
end

-- place writes the user's records rec and dyn (rec false: none) where they
-- belong: its page while both fit a listpack value and the page has room,
-- else the big hash. It returns the key they went to (nil: none).
local function place(u, rec, dyn, P)
  local df = DYN .. u.user
  local B = P.batch
  if B and u.where ~= B.key then B = nil end
  if not rec then
    if B then
      B.del[#B.del + 1] = u.user
      B.del[#B.del + 1] = df
    elseif u.where then
      redis.call('HDEL', u.where, u.user, df)
    end
    return nil
  end
  local pk = P.pages .. u.page
  local target = P.big
  if #rec <= PAGE_VALUE and #dyn <= PAGE_VALUE then
    if u.where == pk then
      target = pk
    else
      -- a user new to its page: split a page first if this one is full enough
      local n = redis.call('HLEN', pk) / 2
      if n >= SPLIT_AT then
        splitPage(P)
        u.page = pageOf(hashOf(u.user), P.level, P.split)
        pk = P.pages .. u.page
        n = redis.call('HLEN', pk) / 2
      end
      if n < PAGE_USERS then target = pk end
    end
  end
  if u.where and u.where ~= target then redis.call('HDEL', u.where, u.user, df) end
  if B and target == B.key then
    local set = B.set
    if rec ~= u.raw then
      set[#set + 1] = u.user
      set[#set + 1] = rec
    end
    if dyn ~= u.dynRaw or rec ~= u.raw then
      set[#set + 1] = df
      set[#set + 1] = dyn
    end
  elseif u.where ~= target or rec ~= u.raw then
    redis.call('HSET', target, u.user, rec, df, dyn)
    redis.call('PEXPIRE', target, P.keep)
  elseif dyn ~= u.dynRaw then
    redis.call('HSET', target, df, dyn)
    redis.call('PEXPIRE', target, P.keep)
  end
  return target
end

-- heads returns the user's records without their items: false (no
-- record) when it has none (items: false) and nothing published or pending.
local function heads(u, items, P)
  local dyn = US
  if u.pend ~= nil then dyn = num(u.pend) .. US .. instant(P, u.due) end
  if not items and u.pub == StatusOffline and u.pend == nil then return false, dyn end
  local rec = num(u.pub)
  if u.mexp > 0 then rec = rec .. MANUAL_EXPIRES .. fmt(u.mexp) end
  return rec, dyn
end

-- reindex keeps the due index of a user whose records were at was and are
-- now at at (nil: none), and whose next sweep is due at nxt (nil: none):
-- a user of the big hash has an entry of its own, a page's users share
-- the page's, which a page visit sets itself (P.visiting).
local function reindex(u, was, at, nxt, P)
  if at == P.big then
    local idx = redis.call('ZSCORE', P.due, u.user)
    if nxt == nil then
      if idx then redis.call('ZREM', P.due, u.user) end
    elseif not idx or nxt < idx + 0 or idx + 0 <= P.now then
      redis.call('ZADD', P.due, fmt(nxt), u.user)
    end
    return
  end
  if was == P.big then redis.call('ZREM', P.due, u.user) end
  if at and nxt ~= nil and not P.visiting then
    local pm = PAGE .. u.page
    local score = redis.call('ZSCORE', P.due, pm)
    if not score or nxt < score + 0 then redis.call('ZADD', P.due, fmt(nxt), pm) end
  end
end

-- store writes back the user's records, manual status and due index, and
-- sets u.nxt, the next instant the user needs a sweep (nil: none). A
-- device's fence is written only when it says more than the device's
-- record as stored now implies (the record is gone, or set no fence, or
-- holds another token, or its fence ends later). The due index is written
-- only when the user must be visited sooner than its score (its page's,
-- or its own in the big hash) says, or its own score has passed: a score
-- left early costs the sweeper one visit that re-indexes, and saves a
-- write per beat. Every item has an instant at which it ends, so that
-- the sweeper removes it then.
local function store(u, P)
  local now = P.now
  local nxt = nil
  local function take(t)
    if t > now and (nxt == nil or t < nxt) then nxt = t end
  end
  local ids = {}
  for id, r in pairs(u.devs) do
    ids[#ids + 1] = id
    if r.gone then
      take(r.active + 1)
    else
      take(deadline(r, P) + 1)
      if not r.bg then take(r.active + P.idle) end
    end
  end
  table.sort(ids)
  local parts, dparts = {}, {}
  for _, id in ipairs(ids) do parts[#parts + 1], dparts[#dparts + 1] = encodeItem(id, u.devs[id]) end
  local fids = {}
  for id, f in pairs(u.fences) do
    local r = u.devs[id]
    if not (r and r.fenced and r.token == f.token and r.login + P.kick >= f.fin) then fids[#fids + 1] = id end
    take(f.fin + 1)
  end
  table.sort(fids)
  for _, id in ipairs(fids) do
    local f = u.fences[id]
    parts[#parts + 1] = FENCE .. id .. US .. fmt(f.fin) .. US .. f.token
  end
  if u.mexp > 0 and live(u, P) > 0 then take(u.mexp) end
  if u.pend ~= nil then take(u.due) end
  u.nxt = nxt
  local rec, dyn = heads(u, #parts > 0, P)
  if rec then
    if #parts > 0 then rec = rec .. IS .. table.concat(parts, IS) end
    if #dparts > 0 then dyn = dyn .. IS .. table.concat(dparts, IS) end
  end
  local was = u.where
  local at = place(u, rec, dyn, P)
  u.where = at
  reindex(u, was, at, nxt, P)
  local man = false
  if u.manual ~= ManualNone then man = num(u.manual) .. US .. fmt(u.mexp) end
  if man ~= u.manRaw then
    if man then redis.call('HSET', P.man, u.user, man) else redis.call('HDEL', P.man, u.user) end
  end
end

-- A sweep visits a page's users in a batch (P.batch, batchStart): it reads
-- their manual statuses at once, and gathers the writes to the page, the
-- counts and the outbox, which batchEnd makes, a command each, because a
-- redis.call per user for each would be most of what an expired device
-- costs. Only writes to the page being visited are gathered (a user moved
-- elsewhere writes at once), and nothing in the batch reads what it
-- gathered.
local function batchStart(P, key, users)
  local names = {}
  for j = 1, #users, 2 do names[#names + 1] = users[j] end
  local manual = {}
  if #names > 0 then
    local got = redis.call('HMGET', P.man, unpack(names))
    for j = 1, #names do manual[names[j]] = got[j] end
  end
  P.batch = { key = key, manual = manual, set = {}, del = {}, cnt = {}, ob = {},
    gone = { mexp = 0, where = key } }
end

local function batchEnd(P)
  local B = P.batch
  P.batch = nil
  if #B.del > 0 then redis.call('HDEL', B.key, unpack(B.del)) end
  if #B.set > 0 then
    redis.call('HSET', B.key, unpack(B.set))
    redis.call('PEXPIRE', B.key, P.keep)
  end
  for st, d in pairs(B.cnt) do
    if d ~= 0 then redis.call('HINCRBY', P.cnt, st, d) end
  end
  if B.seq then
    local ob = B.ob
    redis.call('HSET', P.ob, '#', fmt(B.seq), '@', B.epoch, unpack(ob))
    if B.seq > OUTBOX_MAX then
      local gone = {}
      for j = 1, #ob, 2 do
        local s = ob[j] - OUTBOX_MAX
        if s > 0 then gone[#gone + 1] = fmt(s) end
      end
      redis.call('HDEL', P.ob, unpack(gone))
    end
    redis.call('PEXPIRE', P.ob, OUTBOX_TTL)
  end
end

-- announce counts the user's published change from one status to
-- another, records it in the outbox and appends it to events as user,
-- from, to, outbox ID; while the bucket heals (layout), it only counts it.
local function announce(u, from, to, P, events)
  -- the counts follow the published statuses, in the same script
  local B = P.batch
  if B then
    if from ~= StatusOffline then B.cnt[from] = (B.cnt[from] or 0) - 1 end
    if to ~= StatusOffline then B.cnt[to] = (B.cnt[to] or 0) + 1 end
  else
    if from ~= StatusOffline then redis.call('HINCRBY', P.cnt, from, -1) end
    if to ~= StatusOffline then redis.call('HINCRBY', P.cnt, to, 1) end
  end
  if P.healing then return end
  events[#events + 1] = u.user
  events[#events + 1] = from
  events[#events + 1] = to
  events[#events + 1] = emit(P, 'c' .. US .. u.user .. US .. num(from) .. US .. num(to) .. US .. P.nows)
end

-- settle observes the user's current status and stores everything; a
-- published change goes to the outbox and is appended to events as user,
-- from, to, outbox ID. While the bucket heals (layout), a change takes
-- effect at once, unpublished: no debounce holds it to publish later.
local function settle(u, cause, P, events)
  local from, to
  if P.healing then
    local cur = aggregate(u, P)
    if cur ~= u.pub then from, to = u.pub, cur end
    u.pub, u.pend, u.due = cur, nil, 0
  else
    from, to = observe(u, aggregate(u, P), cause, P)
  end
  store(u, P)
  if from then announce(u, from, to, P, events) end
end

-- settleGone settles user of the batch's key (P.batch: the page being
-- visited, number page, or the big hash, page nil) without a load, when
-- its records rec and dyn hold at most one device, gone (above), no fence
-- and no manual expiry, and it has no manual status: so is every expired
-- device of a sweep. It does what settle does for such a user (it has no
-- device, so its status is OFFLINE) and returns the next instant it needs
-- a sweep, or nil; for any other user it returns false and does nothing.
local function settleGone(user, rec, dyn, page, P, events)
  local B = P.batch
  if not dyn or B.manual[user] or string.byte(rec, 2) == MANUAL_EXPIRES_BYTE then return false end
  if #rec > 1 then
    local cut = string.find(dyn, IS, 1, true)
    if not cut or string.byte(rec, 3) == FENCE_BYTE or string.find(rec, IS, 3, true)
      or not gone(rec, dyn, P, 3, cut + 1) then
      return false
    end
  end
  -- one table for every such user of the visit: a table each would cost
  -- more than the rest of the user's settling
  local u = B.gone
  u.user, u.pub, u.pend, u.due, u.raw, u.dynRaw, u.page = user, string.byte(rec, 1) - 48, nil, 0, rec, dyn, page
  if string.byte(dyn, 1) ~= US_BYTE then
    local pend, due = string.match(dyn, '^(%d)\031(%d+)')
    if not pend then return false end
    u.pend, u.due = pend + 0, due + 0
  end
  local from, to = observe(u, StatusOffline, 'leave', P)
  local r, d = heads(u, false, P)
  if r and not page then
    -- from the big hash: records this short belong in the user's page
    layout(P, true)
    u.page = pageOf(hashOf(user), P.level, P.split)
  end
  local nxt = nil
  if u.pend ~= nil then nxt = u.due end
  local at = place(u, r, d, P)
  if not page then reindex(u, B.key, at, nxt, P) end
  if from then announce(u, from, to, P, events) end
  return nxt
end

local function set(u, id, r)
  u.devs[id] = r
end

local function drop(u, id)
  u.devs[id] = nil
end

-- fence refuses, until fin, every token of device id but token ("" none);
-- a fence already in force keeps its later end, so none is ever shortened.
local function fence(u, id, fin, token)
  local f = u.fences[id]
  if f and f.fin > fin then fin = f.fin end
  u.fences[id] = { fin = fin, token = token }
end
