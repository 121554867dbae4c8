-- logout.lua: ends a device's session by logout or by disconnect.
-- KEYS[1] the bucket's user-state hash   KEYS[2] the bucket's due index
-- ARGV[1..12] common parameters (userlib.lua)
-- ARGV[13] user  ARGV[14] device  ARGV[15] "logout" or "disconnect"
-- ARGV[16] session token ("" for any; a stale token may not end a newer session)
-- Returns {now, code, removed 0/1, events}: code "" or REPLACED (nothing
-- changed). A logout keeps the record, marked gone, until its window ends so
-- that its token stays refused; a disconnect deletes it, so a quick reconnect
-- is a plain heartbeat.
local P = params()
local user, dev, mode, token = ARGV[13], ARGV[14], ARGV[15], ARGV[16]
local u = load(user, KEYS[1], P)
local r = u.devs[dev]
if not r or r.gone then return { P.now, '', 0, {} } end
if token ~= '' and token ~= r.token then return { P.now, 'REPLACED', 0, {} } end
local events = {}
if mode == 'logout' then
  r.gone, r.active = true, deadline(r, P)
  set(u, dev, r)
  settle(u, 'logout', KEYS[1], KEYS[2], P, events)
else
  drop(u, dev)
  settle(u, 'leave', KEYS[1], KEYS[2], P, events)
end
return { P.now, '', 1, events }
