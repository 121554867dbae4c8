-- touch.lua: records members' activity in scopes of one scope bucket.
-- KEYS[1] the bucket's scope registry (P:{sB}:reg)  KEYS[2] the bucket's
-- release counters (P:{sB}:rel)
-- ARGV, in the order the engine sends them:
local ARG_NOW = 1     -- now ms or "" (server TIME)
local ARG_GRACE = 2   -- key grace ms
local ARG_LIFE = 3    -- what a self-sized compact scope's keys live beyond
                      -- the window and the grace, ms (the sweep moves
                      -- members out first)
local ARG_TOUCHES = 4 -- n; then TOUCH_FIELDS for each touch:
local TOUCH_LAYOUT = 0   -- LayoutExact, LayoutCompact (self-sized), LayoutApprox,
                         -- or '3': registry only (a spread compact shard is
                         -- written by shard_touch.lua)
local TOUCH_DATA = 1     -- data key (exact: the sorted set; compact: the
                         -- shards' prefix; approx: the bucket key up to its start)
local TOUCH_TAIL = 2     -- key tail (compact, approx: what follows the shard or bucket start)
local TOUCH_REF = 3      -- scope ref
local TOUCH_MEMBER = 4
local TOUCH_WINDOW = 5   -- ms
local TOUCH_INTERVAL = 6 -- sweep interval ms
local TOUCH_BUCKET = 7   -- approx bucket ms; compact: the member's memberHash
local TOUCH_SIZE = 8     -- compact: members a shard holds on average before a split
local TOUCH_FIELDS = 9
-- Returns {now}. A compact touch that adds a member splits shards while
-- the scope holds more than size × shards members (scopelib.lua): about
-- one split of at most a few hundred entries per size new members.
local now = clock(ARGV[ARG_NOW])
local grace = tonumber(ARGV[ARG_GRACE])
local extra = tonumber(ARGV[ARG_LIFE])
local registered = {}
local compact, order = {}, {}
for i = 0, tonumber(ARGV[ARG_TOUCHES]) - 1 do
  local a = ARG_TOUCHES + 1 + i * TOUCH_FIELDS
  local layout, key, tail = ARGV[a + TOUCH_LAYOUT], ARGV[a + TOUCH_DATA], ARGV[a + TOUCH_TAIL]
  local ref, member = ARGV[a + TOUCH_REF], ARGV[a + TOUCH_MEMBER]
  local win, interval = tonumber(ARGV[a + TOUCH_WINDOW]), tonumber(ARGV[a + TOUCH_INTERVAL])
  local bucket = tonumber(ARGV[a + TOUCH_BUCKET])
  if layout == LayoutExact then
    redis.call('ZADD', key, now, member)
    redis.call('PEXPIRE', key, win + grace)
  elseif layout == LayoutCompact then
    local c = compact[ref]
    if not c then
      c = compactState(key, tail)
      c.life = win + grace + extra
      compact[ref] = c
      order[#order + 1] = c
    end
    local n = shardOf(c, tonumber(ARGV[a + TOUCH_BUCKET]))
    local shard = key .. n .. tail
    local added = redis.call('HSET', shard, member, stamp(now))
    redis.call('PEXPIRE', shard, c.life)
    if added == 1 then
      -- a new member: counted, and its shard due when its window passes
      -- (a shard due earlier keeps its score)
      redis.call('HINCRBY', c.meta, n, 1)
      redis.call('ZADD', c.idx, 'LT', now + win + 1, n)
      c.t = c.t + 1
      local size = tonumber(ARGV[a + TOUCH_SIZE])
      while c.t > size * shardCount(c) and shardCount(c) < MAX_SHARDS do splitShard(c, now, win) end
    end
  elseif layout == LayoutApprox then
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
for _, c in ipairs(order) do saveState(c, c.life) end
return { now }
