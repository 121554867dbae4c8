-- log_append.lua: appends published changes to the bounded change log.
-- KEYS[1] the change log stream (P:log)
-- ARGV[1] approximate maximum length  ARGV[2..] the changes, as JSON
-- Returns the stream IDs of the entries, in order.
local ids = {}
for i = 2, #ARGV do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'c', ARGV[i])
end
return ids
