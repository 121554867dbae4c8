-- heartbeat_full.lua: applies a batch of heartbeats of users in one bucket:
-- those heartbeat_steady.lua left to it, which may log a device in, change its state or
-- the user's status, or be refused. It decides any beat.
-- KEYS[1] the bucket's user-state hash (P:{uB}:st)
-- KEYS[2] the bucket's due index (P:{uB}:due)
-- ARGV[1..12] common parameters (userlib.lua)
-- ARGV[13] n, the number of heartbeats; then 11 fields each:
--   user, device, kind, gateway ("" keep), token ("" none), active 0/1,
--   background 0/1, interval ms (kind and interval apply to a new session
--   only: a session keeps those of its login), metadata ("" keep, "=" ..
--   encoded to set), client time ms ("" none), the token an implicit login
--   of a beat without one issues
-- Returns {now, results}: results holds code, token, from, to for each
-- heartbeat: code "" (accepted) or REPLACED, NOSESSION, TOOMANY, SKEW (a
-- refused heartbeat changes nothing); token the session token in force;
-- from, to the status change it published, or -1, -1.
local now = clock(ARGV[1])
local nows = ARGV[1]
if nows == '' then nows = fmt(now) end
local P = params(now, nows)

-- activity is the instant a beat's user action counts at, and its string:
-- now, or the client's earlier time ARGV "at" (never a later one).
local function activity(at)
  if at ~= '' then
    local t = at + 0
    if t < now then return t, at end
  end
  return now, nows
end

local results = {}
local n = tonumber(ARGV[13])
for i = 0, n - 1 do
  local a = 14 + i * 11
  local user, dev, token, at = ARGV[a], ARGV[a + 1], ARGV[a + 4], ARGV[a + 9]
  local code, issued, events = '', token, nil
  if at ~= '' and math.abs(at - now) > P.skew then
    code = 'SKEW'
  else
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
      if issued == '' then issued = ARGV[a + 10] end
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
