-- login.lua: logs a device in under a policy, kicking what the policy removes.
-- KEYS[1] the bucket's user-state hash   KEYS[2] the bucket's due index
-- ARGV[1..12] common parameters (userlib.lua)
-- ARGV[13] user  ARGV[14] device  ARGV[15] kind  ARGV[16] gateway
-- ARGV[17] policy (0 multi, 1 exclusive, 2 exclusive per kind)
-- ARGV[18] background 0/1  ARGV[19] interval ms  ARGV[20] encoded metadata
-- ARGV[21] the new session token
-- The device's earlier tokens, and those of the devices it kicks, stay
-- refused for KickFence (ARGV[12]; the fence of userlib.lua).
-- Returns {now, code, kicked, events}: code "" or TOOMANY (nothing changed);
-- a repeat of the same login (same token, as a driver retry sends it)
-- kicks nothing and changes nothing but the device's fence, which it
-- sets if the session holding that token has none;
-- kicked holds device, kind, gateway for each removed session (the device's
-- own earlier session included); events holds user, from, to.
local P = params()
local now = P.now
local user, dev, kind, policy = ARGV[13], ARGV[14], ARGV[15], tonumber(ARGV[17])
local function class(k)
  if k == '3' or k == '4' then return 'mobile' end
  return k
end
local u = load(user, KEYS[1], P)
local mine = u.devs[dev]
if mine and not mine.gone and mine.token == ARGV[21] then
  -- a driver retried a login that already applied: change nothing, but
  -- for the fence that login set, which a session with this token that an
  -- implicit login made (a heartbeat carrying it) does not have
  local f = u.fences[dev]
  if f and f.token == ARGV[21] then return { now, '', {}, {} } end
  fence(u, dev, now + P.kick, ARGV[21])
  local events = {}
  settle(u, 'change', KEYS[1], KEYS[2], P, events)
  return { now, '', {}, events }
end
local kicked, keep = {}, 0
for id, r in pairs(u.devs) do
  if state(r, now, P) ~= 0 then
    if id == dev or policy == 1 or (policy == 2 and class(r.kind) == class(kind)) then
      kicked[#kicked + 1] = id
    else
      keep = keep + 1
    end
  end
end
if keep >= P.maxdev then return { now, 'TOOMANY', {}, {} } end
local out, events = {}, {}
local fin = now + P.kick
table.sort(kicked)
for _, id in ipairs(kicked) do
  local r = u.devs[id]
  out[#out + 1] = id
  out[#out + 1] = r.kind
  out[#out + 1] = r.gw
  if id ~= dev then
    -- the kicked session goes; its fence refuses its token, and any older one
    drop(u, id)
    fence(u, id, fin, '')
  end
end
set(u, dev, { kind = kind, gw = ARGV[16], token = ARGV[21], login = now, seen = now, active = now,
  bg = ARGV[18] == '1', iv = tonumber(ARGV[19]), gone = false, fenced = true, meta = ARGV[20] })
-- Every token the device had before is superseded, that of a session just
-- kicked or of one that ended earlier (its record may be gone): the fence
-- keeps only the new one, and the new record implies it.
fence(u, dev, fin, ARGV[21])
settle(u, 'change', KEYS[1], KEYS[2], P, events)
return { now, '', out, events }
