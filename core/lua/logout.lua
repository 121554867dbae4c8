-- logout.lua: ends a device's session by logout or by disconnect.
-- KEYS: the user scripts' (userlib.lua)
-- ARGV: the common ones (userlib.lua), then
local ARG_USER = ARG_OWN
local ARG_DEVICE = ARG_OWN + 1
local ARG_MODE = ARG_OWN + 2  -- "logout" or "disconnect"
local ARG_TOKEN = ARG_OWN + 3 -- session token ("" any; a stale one may not end a newer session)
-- Returns {now, code, removed 0/1, events, lost} (lost: login.lua's): code "" or REPLACED (nothing
-- changed). A logout keeps the record, marked gone, until its window ends so
-- that its token stays refused; a disconnect deletes it, so a quick reconnect
-- is a plain heartbeat.
local P = params()
local user, dev, mode, token = ARGV[ARG_USER], ARGV[ARG_DEVICE], ARGV[ARG_MODE], ARGV[ARG_TOKEN]
local u = load(user, P)
local r = u.devs[dev]
if not r or r.gone then return { P.now, '', 0, {}, P.lost } end
if token ~= '' and token ~= r.token then return { P.now, 'REPLACED', 0, {}, P.lost } end
local events = {}
if mode == 'logout' then
  r.gone, r.active = true, deadline(r, P)
  set(u, dev, r)
  settle(u, 'logout', P, events)
else
  drop(u, dev)
  settle(u, 'leave', P, events)
end
return { P.now, '', 1, events, P.lost }
