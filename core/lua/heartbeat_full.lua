-- heartbeat_full.lua: the full path of a heartbeat. Applies a batch of
-- heartbeats of users in one bucket: those heartbeat_steady.lua left to it,
-- which may log a device in, change its state or the user's status, or be
-- refused. It decides any beat.
-- KEYS: the user scripts' (userlib.lua)
-- ARGV: the common ones (userlib.lua), then
local ARG_BEATS = ARG_OWN     -- n, the number of heartbeats
local ARG_BEAT1 = ARG_OWN + 1 -- the first heartbeat's fields, BEAT_FIELDS each:
local BEAT_USER = 0
local BEAT_DEVICE = 1
local BEAT_KIND = 2           -- for a new session only: a session keeps its login's
local BEAT_GATEWAY = 3        -- "" keep
local BEAT_TOKEN = 4          -- "" none
local BEAT_ACTIVE = 5         -- 0/1
local BEAT_BACKGROUND = 6     -- 0/1
local BEAT_INTERVAL = 7       -- ms, for a new session only, as the kind
local BEAT_META = 8           -- "" keep, "=" .. encoded to set
local BEAT_AT = 9             -- client time ms ("" none)
local BEAT_ISSUE = 10         -- the token an implicit login of a beat without one issues
local BEAT_FIELDS = 11
-- Returns {now, results, lost}: results holds code, token, from, to, id,
-- reassert for each heartbeat: code "" (accepted) or REPLACED, NOSESSION,
-- TOOMANY, SKEW (a refused heartbeat changes nothing); token the session
-- token in force; from, to the status change it published, or -1, -1; id
-- its outbox ID (userlib.lua's emit), or ""; reassert "1" when the bucket
-- heals from a loss and the beat found nothing of its user, not even a
-- manual status, so that its caller sets again what it had set, else "";
-- lost the loss this call found (userlib.lua's layout), or "".
local now = clock(ARGV[ARG_NOW])
local nows = ARGV[ARG_NOW]
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
local n = tonumber(ARGV[ARG_BEATS])
for i = 0, n - 1 do
  local a = ARG_BEAT1 + i * BEAT_FIELDS
  local user, dev, token, at = ARGV[a + BEAT_USER], ARGV[a + BEAT_DEVICE], ARGV[a + BEAT_TOKEN], ARGV[a + BEAT_AT]
  local code, issued, events, reassert = '', token, nil, ''
  if at ~= '' and math.abs(at - now) > P.skew then
    code = 'SKEW'
  else
    events = {}
    local u = load(user, P)
    if P.healing and not u.raw and not u.manRaw then reassert = '1' end
    local r, f = u.devs[dev], u.fences[dev]
    if r and not r.gone then
      if token ~= '' and token ~= r.token then
        code = 'REPLACED'
      elseif token == '' and P.policy ~= PolicyMulti then
        code = 'NOSESSION'
      end
      issued = r.token
    elseif r and token ~= '' then
      -- a logged-out record: its token, or any older one, is superseded
      code = 'REPLACED'
    elseif f and token ~= '' and token ~= f.token then
      -- the device's fence: a login since has superseded this token
      code = 'REPLACED'
    elseif P.policy ~= PolicyMulti then
      code = 'NOSESSION'
    elseif live(u, P) >= P.maxdev then
      code = 'TOOMANY'
    else
      if issued == '' then issued = ARGV[a + BEAT_ISSUE] end
      r = { token = issued, login = now, active = now, meta = '', gone = false, gw = '',
        kind = ARGV[a + BEAT_KIND], iv = tonumber(ARGV[a + BEAT_INTERVAL]), fenced = f ~= nil }
      -- an implicit login under a fence fences its device as a login does:
      -- its token is the one that may come back after it ends
      if f then fence(u, dev, now + P.kick, issued) end
    end
    if code ~= '' then
      issued = ''
    else
      r.seen, r.bg = now, ARGV[a + BEAT_BACKGROUND] == '1'
      local gw = ARGV[a + BEAT_GATEWAY]
      if gw ~= '' and gw ~= r.gw then
        r.gw = gw
      end
      if ARGV[a + BEAT_ACTIVE] == '1' then
        local t = activity(at)
        if t > r.active then r.active = t end
      end
      local meta = ARGV[a + BEAT_META]
      if meta ~= '' and string.sub(meta, 2) ~= r.meta then
        r.meta = string.sub(meta, 2)
      end
      set(u, dev, r)
      settle(u, 'change', P, events)
    end
  end
  results[#results + 1] = code
  results[#results + 1] = issued
  results[#results + 1] = events and events[2] or -1
  results[#results + 1] = events and events[3] or -1
  results[#results + 1] = events and events[4] or ''
  results[#results + 1] = reassert
end
return { now, results, P.lost }
