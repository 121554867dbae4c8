-- sweep_users.lua: one bounded step of the sweep of one user bucket.
-- KEYS[1] the bucket's user-state hash   KEYS[2] the bucket's due index
-- KEYS[3] the bucket's sweep lock
-- ARGV[1..11] common parameters (lib.lua)
-- ARGV[12] lock token  ARGV[13] lock lease ms  ARGV[14] at most this many users
-- Returns {now, visited, more 0/1, lock, events}: lock is "idle" (nothing
-- due), "held" (another sweeper's lock; nothing done) or "ok"; events holds
-- user, from, to. Every user due by now is settled: expired records are
-- deleted after a re-check inside this script, pending changes whose time
-- has come are published, and the user is re-indexed or dropped.
local P = params()
local token, lease, limit = ARGV[12], tonumber(ARGV[13]), tonumber(ARGV[14])
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', P.now, 'LIMIT', 0, limit)
local holder = redis.call('GET', KEYS[3])
if #due == 0 then
  if holder == token then redis.call('DEL', KEYS[3]) end
  return { P.now, 0, 0, 'idle', {} }
end
if holder and holder ~= token then return { P.now, 0, 1, 'held', {} } end
redis.call('SET', KEYS[3], token, 'PX', lease)
local events = {}
for i = 1, #due do
  local u = load(due[i], KEYS[1], P)
  settle(u, 'leave', KEYS[1], KEYS[2], P, events)
end
local more = 0
if #due >= limit then more = 1 else redis.call('DEL', KEYS[3]) end
return { P.now, #due, more, 'ok', events }
