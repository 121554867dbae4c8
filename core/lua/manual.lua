-- manual.lua: sets or clears a user's manual status.
-- KEYS: the user scripts' (userlib.lua)
-- ARGV: the common ones (userlib.lua), then
local ARG_USER = ARG_OWN
local ARG_MANUAL = ARG_OWN + 1   -- MANUAL_*
local ARG_LIFETIME = ARG_OWN + 2 -- ms (0: until cleared)
-- Returns {now, events, lost}: events holds user, from, to, outbox ID;
-- lost is login.lua's.
local P = params()
local user, manual, ttl = ARGV[ARG_USER], tonumber(ARGV[ARG_MANUAL]), tonumber(ARGV[ARG_LIFETIME])
local u = load(user, P)
u.manual, u.mexp = manual, 0
if manual ~= ManualNone and ttl > 0 then u.mexp = P.now + ttl end
local events = {}
settle(u, 'change', P, events)
return { P.now, events, P.lost }
