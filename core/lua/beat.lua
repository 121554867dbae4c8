-- beat.lua: the steady heartbeat. Applies the beats of users in one bucket
-- that only extend a live session, and leaves every other beat, unchanged,
-- to heartbeat.lua. Most beats are steady, and this script is small on
-- purpose: it reads no common parameters it does not need and none of
-- lib.lua, whose setup costs as much as a steady beat's own work.
-- KEYS[1] the bucket's user-state hash (P:{uB}:st), for routing: a steady
-- beat reads its user's device hash alone
-- ARGV[1] now in ms since the epoch, or "" to read the server's TIME
-- ARGV[2] prefix of device-hash keys of this bucket ("P:{uB}:d:")
-- ARGV[3] PushWindow ms   ARGV[4] key grace ms
-- ARGV[5] IdleAfter ms    ARGV[6] MaxSkew ms
-- then 8 fields for each beat: user, device, token ("" none: the engine
-- sends one only under the multi-device policy), gateway ("" keep),
-- metadata ("" keep, "=" .. encoded to set), active 0/1, background 0/1,
-- client time ms ("" none)
-- Returns one string: for each beat, the session token in force when it was
-- applied, or "" when heartbeat.lua must decide it, joined by \31 (tokens
-- hold no control characters). One string, because Redis turns a table
-- reply into RESP at about five times the cost of a string. A beat is steady when its device
-- has a live session that the beat's token names, the beat carries no new
-- gateway or metadata, and it changes neither the device's state nor the
-- user's status while nothing is pending or due: then the user's other
-- devices and state need not be read, and the due index keeps its score
-- (it is already at or before every deadline). The engine sends at most
-- one beat of a user in a call, so that a user's beats in a batch are
-- applied together, in order, by one script or the other.
local now = clock(ARGV[1])
local nows = ARGV[1]
if nows == '' then nows = fmt(now) end
-- Numbers are parsed where a beat needs them, by arithmetic: tonumber
-- parses a string twice, and parsing (strtod) was a steady beat's largest
-- single cost. The common ones are parsed once, on first use.
local DPRE, GRACE = ARGV[2], ARGV[4] + 0
local PUSH, IDLE, SKEW

-- steady applies the beat at ARGV[a] if it is steady, and returns the
-- token in force, or nil. It parses with one pattern per record and writes
-- strings it was given, because splitting and number formatting are what a
-- beat costs most in Lua.
local function steady(a)
  local user, dev, token, at = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 7]
  local t, ts = now, nows
  if at ~= '' then
    SKEW = SKEW or ARGV[6] + 0
    t, ts = at + 0, at
    if math.abs(t - now) > SKEW then return nil end
    -- a client's earlier time counts for activity, never a later one
    if t >= now then t, ts = now, nows end
  end
  local dkey = DPRE .. user
  local got = redis.call('HMGET', dkey, dev, DYN .. dev, STEADY)
  -- the user's due score while nothing is pending: something is due at or
  -- before it, so a beat past it is not steady
  if not got[1] or not got[2] or not got[3] or now >= got[3] + 0 then return nil end
  local seen, active, kept = string.match(got[2], STEADY_DYNAMIC)
  if not seen then return nil end
  local back = string.byte(kept, 1) == 49 -- '1'
  if back ~= (ARGV[a + 6] == '1') then return nil end
  local gw, tok, iv = string.match(got[1], STEADY_STATIC)
  if not tok or (token ~= '' and tok ~= token) then return nil end
  local g, m = ARGV[a + 3], ARGV[a + 4]
  if g ~= '' and g ~= gw then return nil end
  if m ~= '' and string.sub(m, 2) ~= select(6, string.match(got[1], STATIC_FIELDS)) then return nil end
  local win
  if back then
    PUSH = PUSH or ARGV[3] + 0
    win = PUSH
  else
    win = 2 * iv
  end
  if now > seen + win then return nil end
  if ARGV[a + 5] == '1' then
    local last = active + 0
    if not back then
      IDLE = IDLE or ARGV[5] + 0
      if (now - last >= IDLE) ~= (now - t >= IDLE) then return nil end
    end
    if t > last then active = ts end
  end
  redis.call('HSET', dkey, DYN .. dev, nows .. US .. active .. US .. kept)
  -- the key lives until its latest deadline: GT keeps a later one of another device
  redis.call('PEXPIRE', dkey, win + GRACE, 'GT')
  return tok
end

local out = {}
for a = 7, #ARGV, 8 do
  out[#out + 1] = steady(a) or ''
end
return table.concat(out, US)
