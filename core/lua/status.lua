-- status.lua: reads users of one bucket; changes nothing.
-- KEYS[1] the bucket's user-state hash (routing only)
-- ARGV: the common ones (userlib.lua), then
local ARG_USERS = ARG_OWN -- n, then the n users
-- Returns {now, users}: for each user {manual, manual expiry ms, devices},
-- devices being the raw hash as field, record, field, record ...; the core
-- derives states from the records with the same rules.
local P = params()
local out = {}
for i = 1, tonumber(ARGV[ARG_USERS]) do
  local user = ARGV[ARG_USERS + i]
  local manual, mexp = '0', '0'
  local s = redis.call('HGET', KEYS[1], user)
  if s then
    local _
    _, _, _, manual, mexp = string.match(s, STATE_FIELDS)
  end
  out[i] = { manual, mexp, redis.call('HGETALL', P.dpre .. user) }
end
return { P.now, out }
