-- outbox_ack.lua: delivers events of a bucket's outbox (userlib.lua's
-- emit): publishes their messages, then deletes them from the outbox, in
-- one atomic step, so that an event is never acknowledged unpublished. A
-- driver that publishes by itself (a WebAssembly host) sends the events
-- without messages, once they are out.
-- KEYS[1] the bucket's outbox hash (P:{uB}:ob)
-- ARGV:
local ARG_EPOCH = 1  -- the epoch of the IDs; an outbox restarted since holds none of them
local ARG_EVENT1 = 2 -- the first event's fields, EVENT_FIELDS each:
local EVENT_SEQ = 0
local EVENT_CHANNEL = 1 -- "" publishes nothing
local EVENT_PAYLOAD = 2
local EVENT_FIELDS = 3
-- Returns the number of entries deleted.
local seqs = {}
for a = ARG_EVENT1, #ARGV, EVENT_FIELDS do
  if ARGV[a + EVENT_CHANNEL] ~= '' then redis.call('PUBLISH', ARGV[a + EVENT_CHANNEL], ARGV[a + EVENT_PAYLOAD]) end
  seqs[#seqs + 1] = ARGV[a + EVENT_SEQ]
end
if #seqs == 0 or redis.call('HGET', KEYS[1], '@') ~= ARGV[ARG_EPOCH] then return 0 end
return redis.call('HDEL', KEYS[1], unpack(seqs))
