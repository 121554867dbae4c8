-- heartbeat_steady.lua: the steady beat, a heartbeat's first path. Applies
-- the beats of users in one bucket that only extend a live session, and
-- leaves every other beat, unchanged, to heartbeat_full.lua, which the
-- script runs itself, in the same call, for the first of them
-- (heartbeat_left.lua). Most beats are steady, and this script is small on
-- purpose: it reads no common parameters it does not need and builds none
-- of userlib.lua, whose setup costs as much as a steady beat's own work,
-- unless a beat is left. What a steady beat costs the server
-- is mostly the number of Lua C calls and new strings it makes, so the
-- common case (one device, nothing to compare but its session) has a path
-- of its own (single, below) and every other case the general one.
-- KEYS[1] the bucket's big hash, KEYS[2] its meta hash (recordlib.lua),
-- read only when a user is not where the engine expects it
-- ARGV, in the order the engine sends them (appendSteadyHead, appendSteady;
-- TestLuaArgNames holds the two together), named as userlib.lua's are:
local ARG_NOW = 1   -- now in ms since the epoch, or "" to read the server's TIME
local ARG_PAGES = 2 -- prefix of the page keys of this bucket ("P:{uB}:p:")
local ARG_PUSH = 3  -- PushWindow ms
local ARG_KEEP = 4  -- ms a page or the big hash lives past its last write
local ARG_IDLE = 5  -- IdleAfter ms
local ARG_LEFT = 6  -- MaxSkew ms, and what else heartbeat_full.lua takes, joined by US (every byte of
-- an argument costs Redis a step of its string hash, so it is short):
local LEFT_SKEW = 1      -- MaxSkew ms, the one field a steady beat may read (one with a client time)
local LEFT_LEAVE = 2     -- LeaveDelay ms
local LEFT_COALESCE = 3  -- CoalesceWindow ms
local LEFT_MAXDEV = 4    -- MaxDevices
local LEFT_POLICY = 5    -- the engine's login policy
local LEFT_KICK = 6      -- KickFence ms
local LEFT_MAX = 7       -- the most left beats it decides in this call
local LEFT_HEAL = 8      -- userlib.lua's ARG_HEAL for this bucket
local LEFT_SEED = 9      -- the seed of the tokens of implicit logins ("" none), then, if not every
-- beat's is 0, "," and each beat's place j in its run, joined by ",": a beat
-- without a token that is left issues seed.j
local LEFT_PAGE = 10     -- the suffix of ARG_PAGES after the bucket's keys' common prefix, then
local LEFT_COUNTS = 11   -- the suffixes of the keys of the counts hash,
local LEFT_OUTBOX = 12   -- the outbox,
local LEFT_DUE = 13      -- the due index
local LEFT_MANUAL = 14   -- and the manual hash
local LEFT_INTERVAL = 15 -- the heartbeat interval ms of each kind, by number from here
local ARG_BEAT1 = 7 -- the first beat's fields, BEAT_FIELDS each:
local BEAT_USER = 0
local BEAT_DEVICE = 1
local BEAT_TOKEN = 2 -- "" none: the engine sends one only under the multi-device policy
local BEAT_PAGE = 3  -- the page the engine expects the user in, "" unknown (a hint: below)
local BEAT_FLAGS = 4 -- 1 if active + 2 if in the background, one digit
local BEAT_EXTRA = 5 -- the kind, one digit, then, if the beat has any, gateway US client time ms US
-- metadata ("" each: keep, none)
local BEAT_FIELDS = 6
-- Returns one string: for each beat, the session token in force when it was
-- applied, or "" when it was left, joined by US (tokens hold no control
-- characters); then, if the script read the bucket's page geometry, RS,
-- its level, US and its split pointer, so that the engine's hints follow
-- splits. One string, because Redis turns a table reply into RESP at
-- several times the cost of a string. When it left a beat, the reply is
-- {that string, now, results}, results as heartbeat_full.lua returns them
-- for the first beats left, in order, at most LEFT_MAX; the engine sends
-- the others to heartbeat_full.lua.
-- A beat is steady when its device has a live session that the beat's
-- token names, nothing is pending and no manual status expires, the beat
-- carries no new gateway or metadata, it changes neither the device's
-- state nor the user's status, and that status is the one published. Such a beat only moves the device's
-- instants later, so the due index, at or before every instant of the user
-- before the beat, stays so after it: the beat need not write it. The
-- engine sends at most one beat of a user in a call, so that a user's beats
-- in a batch are applied together, in order, by one script or the other.
-- The page hint saves the SHA1 of the user and the read of the geometry
-- that finding a page takes (recordlib.lua): a user's records are in one
-- place at a time, so records found where the hint points are the user's.
-- A hint made stale by a split misses, and the script then finds the page
-- itself. A device ID longer than LONG_ID rarely leaves its records room
-- in a page, so its beat looks in the big hash first.
-- A page's expiry moves to KEEP from now at a device's first beat in each
-- half of KEEP (its last seen instant and now fall in different halves),
-- not at every beat: the engine's KEEP is at least twice every window and
-- grace (userKeep), so a page where any device beats never expires.
-- The rules of device state (userlib.lua's window, deadline, state) are
-- written out inline here, not called: a Lua call per beat costs more than
-- the comparison it makes. TestRuleVectors runs the rule vectors through
-- this script as well as through userlib.lua.
local now = clock(ARGV[ARG_NOW])
local nows = ARGV[ARG_NOW]
if nows == '' then nows = fmt(now) end
-- Numbers are parsed where a beat needs them, by arithmetic: tonumber
-- parses a string twice, and parsing (strtod) is a steady beat's largest
-- single cost. The common ones are parsed once, on first use. What the
-- general path shares with the single one lives in S: a function that
-- reads the script's locals makes a closure of them on every call.
local PAGES, BIG = ARGV[ARG_PAGES], KEYS[1]
local IDLE = ARGV[ARG_IDLE] + 0
local PUSH, HALF, NOWHEX
local level, split, geometry -- read on a miss

-- general applies the beat whose fields start at ARGV[a] to the records
-- rec and dyn (at key) of any shape, if it is steady, and returns the
-- token in force, or false; S holds now, nows, IDLE and the functions it
-- needs. It parses with one pattern per item and writes strings it was
-- given, because splitting and number formatting are what a beat costs
-- most in Lua.
local function general(S, a, key, rec, dyn)
  local now, nows, IDLE = S.now, S.nows, S.idle
  local user, dev, token, flags = ARGV[a + BEAT_USER], ARGV[a + BEAT_DEVICE], ARGV[a + BEAT_TOKEN], ARGV[a + BEAT_FLAGS]
  local active, back = flags == '1' or flags == '3', flags >= '2'
  local extra = ARGV[a + BEAT_EXTRA]
  local g, at, m = '', '', ''
  if #extra > 1 then g, at, m = string.match(extra, '^.([^\031]*)\031([^\031]*)\031(.*)$') end
  local t = now
  if at ~= '' then
    t = at + 0
    if math.abs(t - now) > string.match(ARGV[ARG_LEFT], '^[^\031]*') + 0 then return false end
    -- a client's earlier time counts for activity, never a later one
    if t >= now then t = now end
  end
  local function stateOf(bk, last)
    if bk then return StatusPushOnline end
    if now - last >= IDLE then return StatusAway end
    return StatusOnline
  end
  -- nothing pending: the dynamic record starts with US IS
  if string.sub(dyn, 1, 2) ~= US .. IS then return false end
  -- the static record's header: the published status, and the expiry of
  -- a manual status, which must not have passed
  local si = string.find(rec, IS, 2, true)
  if not si then return false end
  if si > 2 and now >= string.sub(rec, 3, si - 1) + 0 then return false end
  local push = ARGV[ARG_PUSH] + 0
  -- every device's item, the beat's among them: the user's status before
  -- the beat is the most present live device's state
  local best, tok, out, was = StatusOffline, nil, nil, nil
  local di = 2
  while si do
    local se = string.find(rec, IS, si + 1, true)
    local de = string.find(dyn, IS, di + 1, true)
    local item = string.sub(rec, si + 1, (se or 0) - 1)
    if string.byte(item, 1) == 2 then break end -- the fences, after the devices
    local id, bits, gw, tk, iv, more = string.match(item, STEADY_STATIC)
    local seen, da = string.match(string.sub(dyn, di + 1, (de or 0) - 1), STEADY_DYNAMIC)
    if not id or not seen then return false end
    local b = bits + 0
    local bk = b % 2 == 1
    seen = tonumber(seen, 16)
    local win = push
    if not bk then win = 2 * iv end
    local last = seen - da
    local live = b % 4 < 2 and now <= seen + win -- not gone, window not passed
    if id == dev then
      if not live then return false end
      if bk ~= back then return false end
      if token ~= '' and tk ~= token then return false end
      if g ~= '' and g ~= gw then return false end
      if m ~= '' then
        local cur = ''
        if more ~= '' then cur = string.match(item, '^[^\031]*\031[^\031]*\031[^\031]*\031[^\031]*\031[^\031]*\031[^\031]*\031[^\031]*\031(.*)$') end
        if string.sub(m, 2) ~= cur then return false end
      end
      local st, next = stateOf(back, last), last
      if active and t > last then next = t end
      -- the beat changes nothing but its device's instants
      if stateOf(back, next) ~= st then return false end
      if st > best then best = st end
      local nd = '0'
      if next ~= now then nd = string.format('%.0f', now - next) end
      out = string.sub(dyn, 1, di) .. string.format('%x', now) .. US .. nd
      if de then out = out .. string.sub(dyn, de) end
      tok, was = tk, seen
    elseif live then
      local st = stateOf(bk, last)
      if st > best then best = st end
    end
    si, di = se, de
    if (se == nil) ~= (de == nil) then return false end
  end
  if not out then return false end
  -- the status must be the one published, or the manual DND (DND) or
  -- INVISIBLE (OFFLINE) that overrides it: else an instant has passed
  -- that only the full path may observe (a device went idle, unseen)
  local pub = string.byte(rec, 1) - 48
  if pub ~= StatusDND and pub ~= StatusOffline and pub ~= best then return false end
  S.out, S.seen = out, was
  return tok
end

-- Each beat, written out in the loop rather than in functions, for the
-- same reason: find the user's records (where the hint points and in the
-- big hash, the big hash first for a long device ID, else in the page the
-- geometry names), then apply the beat by the single-device path when the
-- records are of its shape, else by the general path, then write the
-- dynamic record, and move the key's expiry when the device's last seen
-- instant and now fall in different halves of KEEP. A break leaves the
-- beat, and left holds the place of its fields.
local out = {}
local S = nil
local left = nil
for a = ARG_BEAT1, #ARGV, BEAT_FIELDS do
  local tok = false
  repeat
    local user, dev = ARGV[a + BEAT_USER], ARGV[a + BEAT_DEVICE]
    local df = DYN .. user
    local page, hinted, key, got = ARGV[a + BEAT_PAGE], nil, nil, nil
    if page ~= '' then hinted = PAGES .. page end
    local first, second = hinted, BIG
    if #dev > LONG_ID then first, second = BIG, hinted end
    if first then
      got = redis.call('HMGET', first, user, df)
      if got[1] then key = first end
    end
    if not key and second then
      got = redis.call('HMGET', second, user, df)
      if got[1] then key = second end
    end
    if not key then
      if level == nil then
        local m = redis.call('HMGET', KEYS[2], 'v', 'L', 's')
        level = false
        if m[1] then
          if m[1] ~= LAYOUT then layoutError(m[1]) end
          level, split, geometry = m[2] + 0, m[3] + 0, m[2] .. US .. m[3]
        end
      end
      if not level then break end
      local k = PAGES .. pageOf(hashOf(user), level, split)
      if k == hinted then break end
      got = redis.call('HMGET', k, user, df)
      if not got[1] then break end
      key = k
    end
    local rec, dyn = got[1], got[2]
    if not dyn then break end
    -- the single-device path: one device, nothing pending, no manual
    -- expiry, nothing extra in the beat
    local seen, da = string.match(dyn, SINGLE_DYNAMIC)
    local bits, tk, iv = nil, nil, nil -- bits: the device's, as a number
    if seen and #ARGV[a + BEAT_EXTRA] == 1 and string.sub(rec, 2, #dev + 2) == IS .. dev then
      tk, iv = string.match(rec, SINGLE_STATIC, #dev + 3)
      if tk then bits = string.byte(rec, #dev + 4) - 48 end
    end
    local write
    if bits then
      local flags, token = ARGV[a + BEAT_FLAGS], ARGV[a + BEAT_TOKEN]
      local active, back = flags == '1' or flags == '3', flags >= '2'
      local b = bits
      if b % 4 >= 2 or (b % 2 == 1) ~= back then break end -- gone, or the background flag changes
      if token ~= '' and tk ~= token then break end
      seen = unhex(seen)
      local last = seen - da
      local win, st
      if back then
        PUSH = PUSH or ARGV[ARG_PUSH] + 0
        win, st = PUSH, StatusPushOnline
      else
        win, st = 2 * iv, StatusOnline
        if now - last >= IDLE then st = StatusAway end
      end
      if now > seen + win then break end -- the window has passed
      -- the beat changes nothing but its device's instants
      if active and now > last and st == StatusAway then break end
      local pub = string.byte(rec, 1) - 48
      if pub ~= StatusDND and pub ~= StatusOffline and pub ~= st then break end
      NOWHEX = NOWHEX or hex(now)
      local nd = '0'
      if not active or now < last then nd = fmt(now - last) end
      write = US .. IS .. NOWHEX .. US .. nd
    else
      S = S or { now = now, nows = nows, idle = IDLE }
      tk = general(S, a, key, rec, dyn)
      if not tk then break end
      write, seen = S.out, S.seen
    end
    redis.call('HSET', key, df, write)
    if not HALF then HALF = ARGV[ARG_KEEP] / 2 end
    if now - now % HALF ~= seen - seen % HALF then redis.call('PEXPIRE', key, ARGV[ARG_KEEP]) end
    tok = tk
  until true
  if not tok then
    left = left or {}
    left[#left + 1] = a
  end
  out[#out + 1] = tok or ''
end
local reply = out[1]
if #out > 1 then reply = table.concat(out, US) end
if geometry then reply = reply .. RS .. geometry end
if not left then return reply end
-- A beat is left: heartbeat_full.lua decides the first LEFT_MAX of those
-- left here, in the function that follows (userlib.lua and
-- heartbeat_full.lua, joined after this file, heartbeat_left.lua after
-- them), which is made only now, so that a steady beat builds none of it.
-- Its ARGV are userlib.lua's common ones, in their order, from ARGV and
-- ARG_LEFT, and each beat's heartbeat_full.lua fields, in their order,
-- from the beat's own here; its KEYS userlib.lua's: the bucket's meta, due
-- index, big hash and manual hash.
local L, i, pack = {}, 1, ARGV[ARG_LEFT]
while true do
  local j = string.find(pack, US, i, true)
  L[#L + 1] = string.sub(pack, i, (j or 0) - 1)
  if not j then break end
  i = j + 1
end
local seed, places = string.match(L[LEFT_SEED], '^([^,]*),?(.*)$')
local J = {}
for j in string.gmatch(places, '[^,]+') do J[#J + 1] = j end
local decide = math.min(#left, L[LEFT_MAX] + 0)
local base = string.sub(PAGES, 1, #PAGES - #L[LEFT_PAGE])
local fullArgv = { nows, ARGV[ARG_IDLE], ARGV[ARG_PUSH], L[LEFT_LEAVE], L[LEFT_COALESCE], ARGV[ARG_KEEP], PAGES,
  L[LEFT_MAXDEV], L[LEFT_SKEW], L[LEFT_POLICY], base .. L[LEFT_COUNTS], L[LEFT_KICK], base .. L[LEFT_OUTBOX], L[LEFT_HEAL],
  decide }
for k = 1, decide do
  local a = left[k]
  local flags, extra, token = ARGV[a + BEAT_FLAGS], ARGV[a + BEAT_EXTRA], ARGV[a + BEAT_TOKEN]
  local kind, g, at, m = string.sub(extra, 1, 1), '', '', ''
  if #extra > 1 then g, at, m = string.match(extra, '^.([^\031]*)\031([^\031]*)\031(.*)$') end
  local active, back, issue = '0', '0', ''
  if flags == '1' or flags == '3' then active = '1' end
  if flags >= '2' then back = '1' end
  if token == '' then
    issue = seed .. '.' .. (J[(a - ARG_BEAT1) / BEAT_FIELDS + 1] or '0')
  end
  local n = #fullArgv
  fullArgv[n + 1], fullArgv[n + 2], fullArgv[n + 3], fullArgv[n + 4] = ARGV[a + BEAT_USER], ARGV[a + BEAT_DEVICE], kind, g
  fullArgv[n + 5], fullArgv[n + 6], fullArgv[n + 7] = token, active, back
  fullArgv[n + 8], fullArgv[n + 9], fullArgv[n + 10], fullArgv[n + 11] = L[LEFT_INTERVAL + kind], m, at, issue
end
local fullKeys = { KEYS[2], base .. L[LEFT_DUE], KEYS[1], base .. L[LEFT_MANUAL] }
local decided = (function(ARGV, KEYS)
