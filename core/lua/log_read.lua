-- log_read.lua: reads the change log after an entry.
-- KEYS[1] the change log stream (P:log)
-- ARGV:
local ARG_AFTER = 1 -- read entries after this ID ("" from the oldest kept)
local ARG_LIMIT = 2 -- at most this many entries
-- Returns {oldest ID kept or "", entries}: entries holds ID, kind ("c" a
-- change, "k" a kick), event JSON.
local after, n = ARGV[ARG_AFTER], tonumber(ARGV[ARG_LIMIT])
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local oldest = ''
if #first > 0 then oldest = first[1][1] end
local start = '-'
if after ~= '' then start = after end
local rows = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', n + 1)
local out = {}
for _, row in ipairs(rows) do
  if row[1] ~= after and #out < 3 * n then
    out[#out + 1] = row[1]
    out[#out + 1] = row[2][1]
    out[#out + 1] = row[2][2]
  end
end
return { oldest, out }
