-- login.lua: logs a device in under a policy, kicking what the policy removes.
-- KEYS[1] the bucket's user-state hash   KEYS[2] the bucket's due index
-- ARGV[1..10] common parameters (lib.lua)
-- ARGV[11] user  ARGV[12] device  ARGV[13] kind  ARGV[14] gateway
-- ARGV[15] policy (0 multi, 1 exclusive, 2 exclusive per kind)
-- ARGV[16] background 0/1  ARGV[17] interval ms  ARGV[18] encoded metadata
-- ARGV[19] the new session token
-- Returns {now, code, kicked, events}: code "" or TOOMANY (nothing changed);
-- a repeat of the same login (same token, as a driver retry sends it)
-- changes nothing and returns no kicks;
-- kicked holds device, kind, gateway for each removed session (the device's
-- own earlier session included); events holds user, from, to.
local P = params()
local now = P.now
local user, dev, kind, policy = ARGV[11], ARGV[12], ARGV[13], tonumber(ARGV[15])
local function class(k)
  if k == '3' or k == '4' then return 'mobile' end
  return k
end
local u = load(user, KEYS[1], P)
local mine = u.devs[dev]
if mine and not mine.gone and mine.token == ARGV[19] then
  -- a driver retried a login that already applied: change nothing
  return { now, '', {}, {} }
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
table.sort(kicked)
for _, id in ipairs(kicked) do
  local r = u.devs[id]
  out[#out + 1] = id
  out[#out + 1] = r.kind
  out[#out + 1] = r.gw
  r.gone = true
  set(u, id, r)
end
set(u, dev, { kind = kind, gw = ARGV[14], token = ARGV[19], login = now, seen = now, active = now,
  bg = ARGV[16] == '1', iv = tonumber(ARGV[17]), gone = false, meta = ARGV[18] })
settle(u, 'change', nil, KEYS[1], KEYS[2], P, events)
return { now, '', out, events }
