-- login.lua: logs a device in under a policy, kicking what the policy removes.
-- KEYS: the user scripts' (userlib.lua)
-- ARGV: the common ones (userlib.lua), then
local ARG_USER = ARG_OWN
local ARG_DEVICE = ARG_OWN + 1
local ARG_KIND = ARG_OWN + 2
local ARG_GATEWAY = ARG_OWN + 3
local ARG_LOGIN_POLICY = ARG_OWN + 4 -- this login's policy (core.Policy)
local ARG_BACKGROUND = ARG_OWN + 5   -- 0/1
local ARG_INTERVAL = ARG_OWN + 6     -- ms
local ARG_META = ARG_OWN + 7         -- encoded metadata
local ARG_TOKEN = ARG_OWN + 8        -- the new session token
-- The device's earlier tokens, and those of the devices it kicks, stay
-- refused for KickFence (ARG_KICK; the fence of userlib.lua).
-- Returns {now, code, kicked, events, lost}: code "" or TOOMANY (nothing changed);
-- a repeat of the same login (same token, as a driver retry sends it)
-- kicks nothing and changes nothing but the device's fence, which it
-- sets if the session holding that token has none;
-- kicked holds device, kind, gateway, outbox ID ("" without a gateway)
-- for each removed session (the device's own earlier session included);
-- events holds user, from, to, outbox ID; lost is the loss this call
-- found (userlib.lua's layout), or "".

-- KindIOS and KindAndroid share one class under PolicyExclusivePerKind.
local P = params()
local now = P.now
local user, dev, kind, policy = ARGV[ARG_USER], ARGV[ARG_DEVICE], ARGV[ARG_KIND], tonumber(ARGV[ARG_LOGIN_POLICY])
local token = ARGV[ARG_TOKEN]
local function class(k)
  if k == KindIOS or k == KindAndroid then return 'mobile' end
  return k
end
local u = load(user, P)
local mine = u.devs[dev]
if mine and not mine.gone and mine.token == token then
  -- a driver retried a login that already applied: change nothing, but
  -- for the fence that login set, which a session with this token that an
  -- implicit login made (a heartbeat carrying it) does not have
  local f = u.fences[dev]
  if f and f.token == token then return { now, '', {}, {}, P.lost } end
  fence(u, dev, now + P.kick, token)
  local events = {}
  settle(u, 'change', P, events)
  return { now, '', {}, events, P.lost }
end
local kicked, keep = {}, 0
for id, r in pairs(u.devs) do
  if state(r, now, P) ~= StatusOffline then
    if id == dev or policy == PolicyExclusive or (policy == PolicyExclusivePerKind and class(r.kind) == class(kind)) then
      kicked[#kicked + 1] = id
    else
      keep = keep + 1
    end
  end
end
if keep >= P.maxdev then return { now, 'TOOMANY', {}, {}, P.lost } end
local out, events = {}, {}
local fin = now + P.kick
table.sort(kicked)
for _, id in ipairs(kicked) do
  local r = u.devs[id]
  out[#out + 1] = id
  out[#out + 1] = r.kind
  out[#out + 1] = r.gw
  -- a session without a gateway has no channel to be kicked on: its kick
  -- is only logged, best effort, and has no outbox entry
  if r.gw ~= '' then out[#out + 1] = emit(P, 'k' .. US .. user .. US .. id .. US .. r.kind .. US .. r.gw .. US .. P.nows) else out[#out + 1] = '' end
  if id ~= dev then
    -- the kicked session goes; its fence refuses its token, and any older one
    drop(u, id)
    fence(u, id, fin, '')
  end
end
set(u, dev, { kind = kind, gw = ARGV[ARG_GATEWAY], token = token, login = now, seen = now, active = now,
  bg = ARGV[ARG_BACKGROUND] == '1', iv = tonumber(ARGV[ARG_INTERVAL]), gone = false, fenced = true,
  meta = ARGV[ARG_META] })
-- Every token the device had before is superseded, that of a session just
-- kicked or of one that ended earlier (its record may be gone): the fence
-- keeps only the new one, and the new record implies it.
fence(u, dev, fin, token)
settle(u, 'change', P, events)
return { now, '', out, events, P.lost }
