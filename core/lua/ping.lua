-- ping.lua: checks that Redis runs scripts, and reads its clock.
-- No KEYS or ARGV.
-- Returns the server's time in ms.
local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
