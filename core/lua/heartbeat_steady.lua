-- heartbeat_steady.lua: the steady beat, a heartbeat's first path. Applies
-- the beats of users in one bucket that only extend a live session, and
-- leaves every other beat, unchanged, to heartbeat_full.lua. Most beats are
-- steady, and this script is small on purpose: it reads no common
-- parameters it does not need and none of userlib.lua, whose setup costs
-- as much as a steady beat's own work.
-- KEYS[1] the bucket's user-state hash (P:{uB}:st), KEYS[2] its due index
-- (P:{uB}:due): a steady beat reads its user's device hash alone, and
-- writes these only to re-index its user (rearm, below)
-- ARGV, in the order the engine sends them (steadyArgs, appendSteady;
-- TestLuaArgNames holds the two together), named as userlib.lua's are:
local ARG_NOW = 1   -- now in ms since the epoch, or "" to read the server's TIME
local ARG_DPRE = 2  -- prefix of the device-hash keys of this bucket ("P:{uB}:d:")
local ARG_PUSH = 3  -- PushWindow ms
local ARG_GRACE = 4 -- key grace ms
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
-- token names, the beat carries no new gateway or metadata, and it changes
-- neither the device's state nor the user's status while nothing is
-- pending or due: then the user's other devices and state need not be
-- read, and the due index keeps its score (it is already at or before
-- every deadline). A beat at or past that score is steady too when the
-- device is its user's only one and nothing else was due: it re-indexes
-- the user (rearm), as heartbeat_full.lua would, so that a device beating
-- at its interval stays on this path. The engine sends at most one beat of
-- a user in a call, so that a user's beats in a batch are applied
-- together, in order, by one script or the other.
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
local DPRE, GRACE = ARGV[ARG_DPRE], ARGV[ARG_GRACE] + 0
local PUSH, IDLE, SKEW

-- rearm re-indexes a user whose due score (score, the steady copy) has
-- passed while nothing was due but the deadlines of its one device, which
-- steady beats have moved since: the device hash holds that device's two
-- fields and the copy alone (no other device, no gone record, no fence
-- field), the state entry holds the same score, nothing is pending and no
-- manual status expires. It writes what store in userlib.lua would: the index
-- at the device's next deadline (its window's end after this beat, or in
-- the foreground its idle instant, whichever is first), the state entry
-- and the copy, with the device's new dynamic record dyn. It returns
-- false, having written nothing, when those conditions do not hold or the
-- device has gone idle, which heartbeat_full.lua must publish.
local function rearm(user, dkey, dev, score, dyn, win, back, active)
  if redis.call('HLEN', dkey) ~= 3 then return false end
  local entry = redis.call('HGET', KEYS[1], user)
  if not entry then return false end
  local pub, pend, pdue, manual, mexp, idx = string.match(entry, STATE_FIELDS)
  if pend ~= '' or mexp ~= '0' or idx ~= score then return false end
  local nxt = now + win + 1
  if not back then
    IDLE = IDLE or ARGV[ARG_IDLE] + 0
    local idle = active + IDLE
    if idle <= now then return false end
    if idle < nxt then nxt = idle end
  end
  local s = fmt(nxt)
  redis.call('ZADD', KEYS[2], s, user)
  redis.call('HSET', KEYS[1], user, stateEntry(pub, pend, pdue, manual, mexp, s))
  redis.call('HSET', dkey, DYN .. dev, dyn, STEADY, s)
  return true
end

-- steady applies the beat whose fields start at ARGV[a] if it is steady,
-- and returns the token in force, or nil. It parses with one pattern per
-- record and writes strings it was given, because splitting and number
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
  local dkey = DPRE .. user
  local got = redis.call('HMGET', dkey, dev, DYN .. dev, STEADY)
  -- got[3], the user's due score while nothing is pending: something may
  -- be due at or after it, so a beat there must re-index the user
  if not got[1] or not got[2] or not got[3] then return nil end
  local due = now >= got[3] + 0
  local seen, active, kept = string.match(got[2], STEADY_DYNAMIC)
  if not seen then return nil end
  local back = string.byte(kept, 1) == 49 -- '1'
  if back ~= (ARGV[a + BEAT_BACKGROUND] == '1') then return nil end
  local gw, tok, iv = string.match(got[1], STEADY_STATIC)
  if not tok or (token ~= '' and tok ~= token) then return nil end
  local g, m = ARGV[a + BEAT_GATEWAY], ARGV[a + BEAT_META]
  if g ~= '' and g ~= gw then return nil end
  if m ~= '' and string.sub(m, 2) ~= select(6, string.match(got[1], STATIC_FIELDS)) then return nil end
  local win
  if back then
    PUSH = PUSH or ARGV[ARG_PUSH] + 0
    win = PUSH
  else
    win = 2 * iv
  end
  if now > seen + win then return nil end
  if ARGV[a + BEAT_ACTIVE] == '1' then
    local last = active + 0
    if not back then
      IDLE = IDLE or ARGV[ARG_IDLE] + 0
      if (now - last >= IDLE) ~= (now - t >= IDLE) then return nil end
    end
    if t > last then active = ts end
  end
  local dyn = nows .. US .. active .. US .. kept
  if not due then
    redis.call('HSET', dkey, DYN .. dev, dyn)
  elseif not rearm(user, dkey, dev, got[3], dyn, win, back, active) then
    return nil
  end
  -- the key lives until its latest deadline: GT keeps a later one of another device
  redis.call('PEXPIRE', dkey, win + GRACE, 'GT')
  return tok
end

local out = {}
for a = ARG_BEAT1, #ARGV, BEAT_FIELDS do
  out[#out + 1] = steady(a) or ''
end
return table.concat(out, US)
