-- counts.lua: the number of users of one bucket by published status.
-- KEYS[1] the bucket's counts hash (P:{uB}:cnt)
-- Returns status, count, status, count … (statuses 1 to 4; OFFLINE is not counted).
return redis.call('HGETALL', KEYS[1])
