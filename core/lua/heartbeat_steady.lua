-- heartbeat_steady.lua: the steady beat, a heartbeat's first path. Applies
-- the beats of users in one bucket that only extend a live session, and
-- leaves every other beat, unchanged, to heartbeat_full.lua. Most beats are
-- steady, and this script is small on purpose: it reads no common
-- parameters it does not need and none of userlib.lua, whose setup costs
-- as much as a steady beat's own work.
-- KEYS[1] the bucket's meta hash, KEYS[2] its big hash (recordlib.lua): a
-- steady beat reads its user's records and rewrites the dynamic one alone,
-- and never the due index (below)
-- ARGV, in the order the engine sends them (steadyArgs, appendSteady;
-- TestLuaArgNames holds the two together), named as userlib.lua's are:
local ARG_NOW = 1   -- now in ms since the epoch, or "" to read the server's TIME
local ARG_PAGES = 2 -- prefix of the page keys of this bucket ("P:{uB}:p:")
local ARG_PUSH = 3  -- PushWindow ms
local ARG_KEEP = 4  -- ms a page or the big hash lives past its last write
local ARG_IDLE = 5  -- IdleAfter ms
local ARG_SKEW = 6  -- MaxSkew ms
local ARG_BEAT1 = 7 -- the first beat's fields, BEAT_FIELDS each:
local BEAT_USER = 0
local BEAT_DEVICE = 1
local BEAT_TOKEN = 2      -- "" none: the engine sends one only under the multi-device policy
local BEAT_GATEWAY = 3    -- "" keep
local BEAT_META = 4       -- "" keep, "=" .. encoded to set
local BEAT_ACTIVE = 5     -- 0/1
local BEAT_BACKGROUND = 6 -- 0/1
local BEAT_AT = 7         -- client time ms ("" none)
local BEAT_FIELDS = 8
-- Returns one string: for each beat, the session token in force when it was
-- applied, or "" when heartbeat_full.lua must decide it, joined by \31
-- (tokens hold no control characters). One string, because Redis turns a
-- table reply into RESP at about five times the cost of a string.
-- A beat is steady when its device has a live session that the beat's
-- token names, nothing is pending and no manual status expires, the beat
-- carries no new gateway or metadata, it changes neither the device's
-- state nor the user's status, and that status is the one published. Such a beat only moves the device's
-- instants later, so the due index, at or before every instant of the user
-- before the beat, stays so after it: the beat need not write it. The
-- engine sends at most one beat of a user in a call, so that a user's beats
-- in a batch are applied together, in order, by one script or the other.
-- The rules of device state (userlib.lua's window, deadline, state) are
-- written out inline here, not called: a Lua call per beat costs more than
-- the comparison it makes. TestRuleVectors runs the rule vectors through
-- this script as well as through userlib.lua.
local now = clock(ARGV[ARG_NOW])
local nows = ARGV[ARG_NOW]
if nows == '' then nows = fmt(now) end
-- Numbers are parsed where a beat needs them, by arithmetic: tonumber
-- parses a string twice, and parsing (strtod) is a steady beat's largest
-- single cost. The common ones are parsed once, on first use.
local PAGES, KEEP = ARGV[ARG_PAGES], ARGV[ARG_KEEP]
local PUSH, IDLE, SKEW

local meta = redis.call('HMGET', KEYS[1], 'v', 'L', 's')
if meta[1] and meta[1] ~= LAYOUT then layoutError(meta[1]) end
local L, S = tonumber(meta[2] or '0'), tonumber(meta[3] or '0')

-- stateOf is a live device's state at now: its background flag back, its
-- last activity last.
local function stateOf(back, last)
  if back then return PUSH_ONLINE end
  if now - last >= IDLE then return AWAY end
  return ONLINE
end

-- steady applies the beat whose fields start at ARGV[a] if it is steady,
-- and returns the token in force, or nil. It parses with one pattern per
-- item and writes strings it was given, because splitting and number
-- formatting are what a beat costs most in Lua.
local function steady(a)
  local user, dev, token, at = ARGV[a + BEAT_USER], ARGV[a + BEAT_DEVICE], ARGV[a + BEAT_TOKEN], ARGV[a + BEAT_AT]
  local t, ts = now, nows
  if at ~= '' then
    SKEW = SKEW or ARGV[ARG_SKEW] + 0
    t, ts = at + 0, at
    if math.abs(t - now) > SKEW then return nil end
    -- a client's earlier time counts for activity, never a later one
    if t >= now then t, ts = now, nows end
  end
  local key = PAGES .. pageOf(hashOf(user), L, S)
  local dfield = DYN .. user
  local got = redis.call('HMGET', key, user, dfield)
  if not got[1] then
    key = KEYS[2]
    got = redis.call('HMGET', key, user, dfield)
  end
  local rec, dyn = got[1], got[2]
  -- nothing pending: the dynamic record starts with US IS
  if not rec or not dyn or string.sub(dyn, 1, 2) ~= US .. IS then return nil end
  -- the static record's header: the published status, and the expiry of
  -- a manual status, which must not have passed
  local si = string.find(rec, IS, 2, true)
  if not si then return nil end
  if si > 2 and now >= string.sub(rec, 3, si - 1) + 0 then return nil end
  PUSH = PUSH or ARGV[ARG_PUSH] + 0
  IDLE = IDLE or ARGV[ARG_IDLE] + 0
  -- every device's item, the beat's among them: the user's status before
  -- the beat is the most present live device's state
  local best, tok, out = OFFLINE, nil, nil
  local di = 2
  while si do
    local se = string.find(rec, IS, si + 1, true)
    local de = string.find(dyn, IS, di + 1, true)
    local item = string.sub(rec, si + 1, (se or 0) - 1)
    if string.byte(item, 1) == 2 then break end -- the fences, after the devices
    local id, bits, gw, tk, iv, more = string.match(item, STEADY_STATIC)
    local seen, da = string.match(string.sub(dyn, di + 1, (de or 0) - 1), STEADY_DYNAMIC)
    if not id or not seen then return nil end
    local b = bits + 0
    local back = b % 2 == 1
    seen = unhex(seen)
    local win = PUSH
    if not back then win = 2 * iv end
    local last = seen - da
    local live = b % 4 < 2 and now <= seen + win -- not gone, window not passed
    if id == dev then
      if not live then return nil end
      if back ~= (ARGV[a + BEAT_BACKGROUND] == '1') then return nil end
      if token ~= '' and tk ~= token then return nil end
      local g, m = ARGV[a + BEAT_GATEWAY], ARGV[a + BEAT_META]
      if g ~= '' and g ~= gw then return nil end
      if m ~= '' then
        local cur = ''
        if more ~= '' then cur = string.match(item, '^[^\031]*\031[^\031]*\031[^\031]*\031[^\031]*\031[^\031]*\031[^\031]*\031[^\031]*\031(.*)$') end
        if string.sub(m, 2) ~= cur then return nil end
      end
      local st, next = stateOf(back, last), last
      if ARGV[a + BEAT_ACTIVE] == '1' and t > last then next = t end
      -- the beat changes nothing but its device's instants
      if stateOf(back, next) ~= st then return nil end
      if st > best then best = st end
      local nd = '0'
      if next ~= now then nd = fmt(now - next) end
      out = string.sub(dyn, 1, di) .. hex(now) .. US .. nd
      if de then out = out .. string.sub(dyn, de) end
      tok = tk
    elseif live then
      local st = stateOf(back, last)
      if st > best then best = st end
    end
    si, di = se, de
    if (se == nil) ~= (de == nil) then return nil end
  end
  if not out then return nil end
  -- the status must be the one published, or the manual DND (DND) or
  -- INVISIBLE (OFFLINE) that overrides it: else an instant has passed
  -- that only the full path may observe (a device went idle, unseen)
  local pub = string.byte(rec, 1) - 48
  if pub ~= DND and pub ~= OFFLINE and pub ~= best then return nil end
  redis.call('HSET', key, dfield, out)
  redis.call('PEXPIRE', key, KEEP)
  return tok
end

local out = {}
for a = ARG_BEAT1, #ARGV, BEAT_FIELDS do
  out[#out + 1] = steady(a) or ''
end
return table.concat(out, US)
