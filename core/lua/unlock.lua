-- unlock.lua: releases a sweep lock only if it still holds this token.
-- KEYS[1] the lock
local ARG_TOKEN = 1 -- ARGV: the token
-- Returns 1 if released, 0 if the lock was gone or held by another token.
if redis.call('GET', KEYS[1]) == ARGV[ARG_TOKEN] then
  return redis.call('DEL', KEYS[1])
end
return 0
