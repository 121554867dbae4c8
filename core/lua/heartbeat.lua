-- heartbeat.lua: applies a batch of heartbeats of users in one bucket.
-- KEYS[1] the bucket's user-state hash (P:{uB}:st)
-- KEYS[2] the bucket's due index (P:{uB}:due)
-- ARGV[1..12] common parameters (lib.lua)
-- ARGV[13] token seed: an implicit login of heartbeat i (from 0) without a
-- token gets the token seed .. "." .. i
-- ARGV[14] n, the number of heartbeats; then 10 fields each:
--   user, device, kind, gateway ("" keep), token ("" none), active 0/1,
--   background 0/1, interval ms (kind and interval apply to a new session
--   only: a session keeps those of its login), metadata ("" keep, "=" .. encoded to set), client time ms
--   ("" none)
-- Returns {now, results}: results holds code, token, from, to for each
-- heartbeat: code "" (accepted) or REPLACED, NOSESSION, TOOMANY, SKEW (a
-- refused heartbeat changes nothing); token the session token in force;
-- from, to the status change it published, or -1, -1.
local now = clock(ARGV[1])
local nows = ARGV[1]
if nows == '' then nows = fmt(now) end
-- The quick path reads only these parameters; the full path builds all of
-- them (params), once, when a beat first needs it: converting them costs
-- as much as the quick path's own work.
local IDLE, PUSH, GRACE = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6])
local DPRE, MULTI = ARGV[7], ARGV[10] == '0'
local P = nil

-- activity is the instant a beat's user action counts at, and its string:
-- now, or the client's earlier time ARGV "at" (never a later one).
local function activity(at)
  if at ~= '' and tonumber(at) < now then return tonumber(at), at end
  return now, nows
end

-- quick applies the beat at ARGV[a] when it only extends a live session
-- that carries no new gateway or metadata, and changes neither the device's
-- state nor the user's status while nothing is pending or due: then the
-- user's other devices and state need not be read, and the due index keeps
-- its score (it is already at or before every deadline). It parses with one
-- pattern per record and writes strings it was given, because splitting and
-- number formatting are what a beat costs most in Lua. Returns the token in
-- force, or nil when the full path must decide.
local function quick(user, dev, token, at, a)
  local dkey = DPRE .. user
  local got = redis.call('HMGET', dkey, dev, DYN .. dev)
  if not got[1] or not got[2] then return nil end
  local seen, active, bg, flags = string.match(got[2], DYNAMIC_FIELDS)
  -- not gone (0, or 2: fenced, a flag the beat keeps)
  if flags ~= '0' and flags ~= '2' then return nil end
  local _, gw, tok, _, iv, meta = string.match(got[1], STATIC_FIELDS)
  if not tok then return nil end
  if tok ~= token and (token ~= '' or not MULTI) then return nil end
  local g, m = ARGV[a + 3], ARGV[a + 8]
  if (g ~= '' and g ~= gw) or (m ~= '' and string.sub(m, 2) ~= meta) then return nil end
  local back = bg == '1'
  if back ~= (ARGV[a + 6] == '1') then return nil end
  local win = PUSH
  if not back then win = 2 * tonumber(iv) end
  if now > tonumber(seen) + win then return nil end
  local s = redis.call('HGET', KEYS[1], user)
  if not s then return nil end
  local _, pend, _, _, _, idx = string.match(s, STATE_FIELDS)
  if pend ~= '' or not idx or idx == '' or tonumber(idx) <= now then return nil end
  local last = tonumber(active)
  if ARGV[a + 5] == '1' then
    local t, ts = activity(at)
    if not back and (now - last >= IDLE) ~= (now - t >= IDLE) then return nil end
    if t > last then active = ts end
  end
  redis.call('HSET', dkey, DYN .. dev, nows .. US .. active .. US .. bg .. US .. flags)
  -- the key lives until its latest deadline: GT keeps a later one of another device
  redis.call('PEXPIRE', dkey, win + GRACE, 'GT')
  return tok
end

local results = {}
local seed = ARGV[13]
local n = tonumber(ARGV[14])
for i = 0, n - 1 do
  local a = 15 + i * 10
  local user, dev, token, at = ARGV[a], ARGV[a + 1], ARGV[a + 4], ARGV[a + 9]
  local code, issued, events = '', token, nil
  local fast
  if at ~= '' and math.abs(tonumber(at) - now) > tonumber(ARGV[9]) then
    code = 'SKEW'
  else
    fast = quick(user, dev, token, at, a)
  end
  if fast then
    issued = fast
  elseif code == '' then
    P = P or params(now, nows)
    events = {}
    local u = load(user, KEYS[1], P)
    local r, f = u.devs[dev], u.fences[dev]
    if r and not r.gone then
      if token ~= '' and token ~= r.token then
        code = 'REPLACED'
      elseif token == '' and P.policy ~= 0 then
        code = 'NOSESSION'
      end
      issued = r.token
    elseif r and token ~= '' then
      -- a logged-out record: its token, or any older one, is superseded
      code = 'REPLACED'
    elseif f and token ~= '' and token ~= f.token then
      -- the device's fence: a login since has superseded this token
      code = 'REPLACED'
    elseif P.policy ~= 0 then
      code = 'NOSESSION'
    elseif live(u, P) >= P.maxdev then
      code = 'TOOMANY'
    else
      if issued == '' then issued = seed .. '.' .. i end
      r = { token = issued, login = now, active = now, meta = '', gone = false, gw = '',
        kind = ARGV[a + 2], iv = tonumber(ARGV[a + 7]), fenced = f ~= nil }
      -- an implicit login under a fence fences its device as a login does:
      -- its token is the one that may come back after it ends
      if f then fence(u, dev, now + P.kick, issued) end
    end
    if code ~= '' then
      issued = ''
    else
      local static = r.seen == nil
      r.seen, r.bg = now, ARGV[a + 6] == '1'
      if ARGV[a + 3] ~= '' and ARGV[a + 3] ~= r.gw then
        r.gw, static = ARGV[a + 3], true
      end
      if ARGV[a + 5] == '1' then
        local t = activity(at)
        if t > r.active then r.active = t end
      end
      local meta = ARGV[a + 8]
      if meta ~= '' and string.sub(meta, 2) ~= r.meta then
        r.meta, static = string.sub(meta, 2), true
      end
      if static then set(u, dev, r) else seen(u, dev, r) end
      settle(u, 'change', KEYS[1], KEYS[2], P, events)
    end
  end
  results[#results + 1] = code
  results[#results + 1] = issued
  results[#results + 1] = events and events[2] or -1
  results[#results + 1] = events and events[3] or -1
end
return { now, results }
