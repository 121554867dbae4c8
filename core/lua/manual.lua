-- manual.lua: sets or clears a user's manual status.
-- KEYS[1] the bucket's user-state hash   KEYS[2] the bucket's due index
-- ARGV[1..12] common parameters (userlib.lua)
-- ARGV[13] user  ARGV[14] manual (0 none, 1 DND, 2 INVISIBLE)
-- ARGV[15] lifetime ms (0: until cleared)
-- Returns {now, events}; events holds user, from, to.
local P = params()
local user, manual, ttl = ARGV[13], tonumber(ARGV[14]), tonumber(ARGV[15])
local u = load(user, KEYS[1], P)
u.manual, u.mexp = manual, 0
if manual ~= 0 and ttl > 0 then u.mexp = P.now + ttl end
local events = {}
settle(u, 'change', KEYS[1], KEYS[2], P, events)
return { P.now, events }
