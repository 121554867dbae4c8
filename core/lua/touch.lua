-- touch.lua: records members' activity in scopes of one scope bucket.
-- KEYS[1] the bucket's scope registry (P:{sB}:reg)  KEYS[2] the bucket's
-- release counters (P:{sB}:rel), where "#ref" counts the member changes of a
-- compact scope (see sweep_scopes.lua)
-- ARGV, in the order the engine sends them:
local ARG_NOW = 1     -- now ms or "" (server TIME)
local ARG_GRACE = 2   -- key grace ms
local ARG_TOUCHES = 3 -- n; then TOUCH_FIELDS for each touch:
local TOUCH_LAYOUT = 0   -- 0 exact, 1 compact, 2 approx, 3 registry only (a
                         -- spread compact shard is written by shard_touch.lua)
local TOUCH_DATA = 1     -- data key (exact: the sorted set; compact: the
                         -- member's shard; approx: the bucket key up to its start)
local TOUCH_TAIL = 2     -- key tail (approx: what follows the bucket start)
local TOUCH_REF = 3      -- scope ref
local TOUCH_MEMBER = 4
local TOUCH_WINDOW = 5   -- ms
local TOUCH_INTERVAL = 6 -- sweep interval ms
local TOUCH_BUCKET = 7   -- approx bucket ms
local TOUCH_FIELDS = 8
-- Returns {now}.
local now = clock(ARGV[ARG_NOW])
local grace = tonumber(ARGV[ARG_GRACE])
local registered = {}
for i = 0, tonumber(ARGV[ARG_TOUCHES]) - 1 do
  local a = ARG_TOUCHES + 1 + i * TOUCH_FIELDS
  local layout, key, tail = ARGV[a + TOUCH_LAYOUT], ARGV[a + TOUCH_DATA], ARGV[a + TOUCH_TAIL]
  local ref, member = ARGV[a + TOUCH_REF], ARGV[a + TOUCH_MEMBER]
  local win, interval = tonumber(ARGV[a + TOUCH_WINDOW]), tonumber(ARGV[a + TOUCH_INTERVAL])
  local bucket = tonumber(ARGV[a + TOUCH_BUCKET])
  if layout == '0' then
    redis.call('ZADD', key, now, member)
    redis.call('PEXPIRE', key, win + grace)
  elseif layout == '1' then
    if redis.call('HSET', key, member, stamp(now)) == 1 then
      -- a new member: a sweep walking the scope over several steps must
      -- know that its running sum may have missed it
      redis.call('HINCRBY', KEYS[2], '#' .. ref, 1)
    end
    redis.call('PEXPIRE', key, win + grace)
  elseif layout == '2' then
    local b = math.floor(now / bucket) * bucket
    local k = key .. fmt(b) .. tail
    redis.call('PFADD', k, member)
    redis.call('PEXPIRE', k, win + bucket + grace)
  end
  if not registered[ref] then
    -- once per scope and call: a batch into one hot scope is one ZADD
    redis.call('ZADD', KEYS[1], 'NX', now + interval, ref)
    registered[ref] = true
  end
end
return { now }
