-- shard_sweep.lua: one bounded step of the sweep of one spread compact
-- shard: removes the members whose window has passed (checked and deleted
-- inside this script) among those one HSCAN step returns.
-- KEYS[1] the shard
-- ARGV[1] now ms or ""  ARGV[2] window ms  ARGV[3] HSCAN cursor ("0" to
-- start)  ARGV[4] HSCAN COUNT
-- Returns {now, removed, remaining, cursor}: cursor is "0" once the shard
-- has been walked to its end, and remaining (the shard's size at that
-- instant) is meaningful only then. A small (listpack) shard is walked in
-- one step; a large one takes about its size / COUNT steps, so no step
-- grows with the shard.
local now = clock(ARGV[1])
local removed, remaining, cursor = sweepShard(KEYS[1], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[2]), now)
return { now, removed, remaining, cursor }
