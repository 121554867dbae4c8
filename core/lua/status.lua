-- status.lua: reads users of one bucket; changes nothing.
-- KEYS: the user scripts' (userlib.lua)
-- ARGV: the common ones (userlib.lua), then
local ARG_USERS = ARG_OWN -- n, then the n users
-- Returns {now, users}: for each user {manual, manual expiry ms, static
-- record, dynamic record}, the records as stored (recordlib.lua; "" none);
-- the core derives states from the records with the same rules.
local P = params()
layout(P, false)
local out = {}
for i = 1, tonumber(ARGV[ARG_USERS]) do
  local user = ARGV[ARG_USERS + i]
  local manual, mexp = '0', '0'
  local m = redis.call('HGET', P.man, user)
  if m then manual, mexp = string.match(m, '^([^\031]*)\031(.*)$') end
  local got = redis.call('HMGET', P.pages .. pageOf(hashOf(user), P.level, P.split), user, DYN .. user)
  if not got[1] then got = redis.call('HMGET', P.big, user, DYN .. user) end
  out[i] = { manual, mexp, got[1] or '', got[2] or '' }
end
return { P.now, out }
