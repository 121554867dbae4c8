-- outbox_ack.lua: deletes delivered events from a bucket's outbox
-- (userlib.lua's emit), once the engine has published and logged them.
-- KEYS[1] the bucket's outbox hash (P:{uB}:ob)
-- ARGV:
local ARG_EPOCH = 1 -- the epoch of the IDs; an outbox restarted since holds none of them
local ARG_SEQ1 = 2  -- then the sequence numbers of the delivered events
-- Returns the number of entries deleted.
if redis.call('HGET', KEYS[1], '@') ~= ARGV[ARG_EPOCH] then return 0 end
local seqs = {}
for a = ARG_SEQ1, #ARGV do seqs[#seqs + 1] = ARGV[a] end
if #seqs == 0 then return 0 end
return redis.call('HDEL', KEYS[1], unpack(seqs))
