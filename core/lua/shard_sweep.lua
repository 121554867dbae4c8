-- shard_sweep.lua: one bounded step of the sweep of one spread compact
-- shard: removes the members whose window has passed (checked and deleted
-- inside this script) among those one HSCAN step returns.
-- KEYS[1] the shard
-- ARGV:
local ARG_NOW = 1    -- now ms or ""
local ARG_WINDOW = 2 -- ms
local ARG_CURSOR = 3 -- HSCAN cursor ("0" to start)
local ARG_SCAN = 4   -- HSCAN COUNT
-- Returns {now, removed, remaining, cursor}: cursor is "0" once the shard
-- has been walked to its end, and remaining (the shard's size at that
-- instant) is meaningful only then. A small (listpack) shard is walked in
-- one step; a large one takes about its size / COUNT steps, so no step
-- grows with the shard.
local now = clock(ARGV[ARG_NOW])
local removed, remaining, cursor = sweepShard(KEYS[1], ARGV[ARG_CURSOR], tonumber(ARGV[ARG_SCAN]),
  tonumber(ARGV[ARG_WINDOW]), now)
return { now, removed, remaining, cursor }
