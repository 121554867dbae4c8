-- log_append.lua: appends published changes, kicks and losses to the bounded log.
-- KEYS[1] the change log stream (P:log)
-- ARGV:
local ARG_MAXLEN = 1 -- approximate maximum length
local ARG_EVENT1 = 2 -- then EVENT_FIELDS for each event:
local EVENT_KIND = 0 -- "c" a change, "k" a kick, "l" a data loss
local EVENT_JSON = 1 -- the event as JSON
local EVENT_FIELDS = 2
-- Returns the stream IDs of the entries, in order.
local ids = {}
for a = ARG_EVENT1, #ARGV, EVENT_FIELDS do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[ARG_MAXLEN], '*', ARGV[a + EVENT_KIND],
    ARGV[a + EVENT_JSON])
end
return ids
