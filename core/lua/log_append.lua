-- log_append.lua: appends published changes and kicks to the bounded log.
-- KEYS[1] the change log stream (P:log)
-- ARGV[1] approximate maximum length; then pairs of kind ("c" a change,
-- "k" a kick) and the event as JSON
-- Returns the stream IDs of the entries, in order.
local ids = {}
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', ARGV[i], ARGV[i + 1])
end
return ids
