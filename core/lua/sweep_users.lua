-- sweep_users.lua: one bounded step of the sweep of one user bucket.
-- KEYS: the user scripts' (userlib.lua), then KEYS[5] the bucket's sweep lock
-- ARGV: the common ones (userlib.lua), then
local ARG_LOCK_TOKEN = ARG_OWN
local ARG_LEASE = ARG_OWN + 1  -- lock lease ms
local ARG_LIMIT = ARG_OWN + 2  -- about this many users (a page's are taken whole)
local ARG_BUDGET = ARG_OWN + 3 -- server time budget of the step in µs (0: none)
local ARG_REDELIVER = ARG_OWN + 4 -- ms after which an undelivered outbox event is the sweep's to deliver
-- Returns {now, visited, more 0/1, lock, events, outbox}: lock is "idle"
-- (nothing due), "held" (another sweeper's lock; nothing done) or "ok";
-- events holds user, from, to, outbox ID; outbox holds ID, entry for up
-- to OUTBOX_STEP events of the bucket's outbox (userlib.lua's emit) that
-- are older than ARG_REDELIVER and still undelivered: their engine lost
-- the reply, died, or failed to publish, so the sweep delivers them again
-- (readers drop repeats by ID). Every page and big-hash user due by now is
-- settled (every user of a due page): expired records are deleted after a
-- re-check inside this script, pending changes whose time has come are
-- published, and the page or user is re-indexed or dropped. A step settles
-- about ARG_LIMIT users (a page's users all, at most PAGE_USERS), and
-- stops early once it has run for the time budget (the server's TIME, read
-- between pages and every few users), so that neither a slow host nor users
-- with many devices make a step long.
local P = params()
local token, lease, limit, budget = ARGV[ARG_LOCK_TOKEN], tonumber(ARGV[ARG_LEASE]), tonumber(ARGV[ARG_LIMIT]),
  tonumber(ARGV[ARG_BUDGET])
local OUTBOX_STEP = 128
-- undelivered lists the outbox's events decided before now - ARG_REDELIVER.
local function undelivered()
  local out = {}
  if redis.call('HLEN', P.ob) <= 2 then return out end -- only the counter and the epoch
  local before = P.now - tonumber(ARGV[ARG_REDELIVER])
  local page = redis.call('HSCAN', P.ob, 0, 'COUNT', OUTBOX_STEP)[2]
  local epoch = string.match(P.ob, '{([^}]*)}') .. '.' .. redis.call('HGET', P.ob, '@')
  for i = 1, #page, 2 do
    local f, v = page[i], page[i + 1]
    if f ~= '#' and f ~= '@' and #out < 2 * OUTBOX_STEP then
      local at = tonumber(string.match(v, '\031(%d+)$')) -- the last field: the instant decided
      if at and at <= before then
        out[#out + 1] = epoch .. '.' .. f
        out[#out + 1] = v
      end
    end
  end
  return out
end
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', P.now, 'LIMIT', 0, limit)
local holder = redis.call('GET', KEYS[5])
if #due == 0 then
  if holder == token then redis.call('DEL', KEYS[5]) end
  return { P.now, 0, 0, 'idle', {}, undelivered() }
end
if holder and holder ~= token then return { P.now, 0, 1, 'held', {}, {} } end
redis.call('SET', KEYS[5], token, 'PX', lease)
local function micros()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local every = 4 -- big-hash users between two reads of the clock
local start = 0
if budget > 0 and #due > 1 then start = micros() end
local events, visited, taken = {}, 0, 0
for i = 1, #due do
  local m = due[i]
  if string.byte(m, 1) == 1 then
    -- a page: every user in it, then its score is the earliest of theirs
    local n = string.sub(m, 2)
    local pk = P.pages .. n
    local flat = redis.call('HGETALL', pk)
    local users, dyns = {}, {}
    for j = 1, #flat, 2 do
      if string.byte(flat[j], 1) == 1 then
        dyns[string.sub(flat[j], 2)] = flat[j + 1]
      else
        users[#users + 1] = flat[j]
        users[#users + 1] = flat[j + 1]
      end
    end
    P.visiting = true
    batchStart(P, pk, users)
    local low = nil
    for j = 1, #users, 2 do
      local user, rec = users[j], users[j + 1]
      local nxt = settleGone(user, rec, dyns[user], n, P, events)
      if nxt == false then
        local u = load(user, P, rec, dyns[user], pk, n)
        settle(u, 'leave', P, events)
        if u.where == pk then nxt = u.nxt end
      end
      if nxt and (low == nil or nxt < low) then low = nxt end
    end
    batchEnd(P)
    P.visiting = false
    visited = visited + #users / 2
    if low then redis.call('ZADD', KEYS[2], instant(P, low), m) else redis.call('ZREM', KEYS[2], m) end
  else
    -- a user of the big hash, in a batch of its own, so that an expired
    -- device is settled without a load (settleGone) as a page's are
    local got = redis.call('HMGET', P.big, m, DYN .. m)
    if got[1] then
      batchStart(P, P.big, { m, got[1] })
      if settleGone(m, got[1], got[2], nil, P, events) == false then
        settle(load(m, P, got[1], got[2] or nil, P.big), 'leave', P, events)
      end
      batchEnd(P)
    else
      -- an entry of a user no longer in the big hash is stale
      local u = load(m, P)
      settle(u, 'leave', P, events)
      if u.where ~= P.big then redis.call('ZREM', KEYS[2], m) end
    end
    visited = visited + 1
  end
  taken = i
  if visited >= limit and i < #due then break end
  if start > 0 and (string.byte(m, 1) == 1 or i % every == 0) and i < #due and micros() - start >= budget then break end
end
local more = 0
if taken < #due or #due >= limit then more = 1 else redis.call('DEL', KEYS[5]) end
-- the outbox once a pass, at its last step: the events of the pass's
-- other steps are not yet due for redelivery anyway
local again = {}
if more == 0 then again = undelivered() end
return { P.now, visited, more, 'ok', events, again }
