-- rules_eval.lua: runs userlib.lua's rules on one vector of rules.json, for
-- TestRuleVectors, which prepends recordlib.lua and userlib.lua as the core
-- does for a user script.
-- KEYS none
-- ARGV: the common ones (userlib.lua; ARG_NOW the vector's now), then
local ARG_MODE = ARG_OWN      -- "user" or "record"
local ARG_INPUT = ARG_OWN + 1 -- the vector as JSON
-- "user": the input holds devices (each a record's fields as decode returns
-- them, numbers as numbers), manual, pub, pend (-1 none), due and cause
-- ("" to observe nothing).
-- Each device goes through its stored form (encodeItem, decodeItem), then
-- state, aggregate and observe decide. Returns JSON: {states = ",s1,s2,…",
-- aggregate, pub, pend (-1 none), due, from, to (-1, -1: nothing
-- published), stored = {{static, dynamic}, …}}.
-- "record": the input holds static and dynamic, a device's stored items.
-- Returns JSON: {id, record = decodeItem's fields, static, dynamic = the
-- record encoded again}.
local P = params()
local c = cjson.decode(ARGV[ARG_INPUT])
if ARGV[ARG_MODE] == 'record' then
  local id, r = decodeItem(c.static, c.dynamic)
  local static, dynamic = encodeItem(id, r)
  return cjson.encode({ id = id, record = r, static = static, dynamic = dynamic })
end
local u = { devs = {}, manual = c.manual, pub = c.pub, pend = nil, due = 0 }
if c.pend >= 0 then u.pend, u.due = c.pend, c.due end
local states, stored = {}, {}
for i, d in ipairs(c.devices) do
  local static, dynamic = encodeItem(d.id, d)
  local _, r = decodeItem(static, dynamic)
  u.devs[i] = r
  states[i] = state(r, P.now, P)
  stored[i] = { static, dynamic }
end
local agg = aggregate(u, P)
local from, to = -1, -1
if c.cause ~= '' then
  local f, t = observe(u, agg, c.cause, P)
  if f then from, to = f, t end
end
-- states after a comma, which keeps a JSON encoder from writing them as a number
return cjson.encode({ states = ',' .. table.concat(states, ','), aggregate = agg, pub = u.pub, pend = u.pend or -1,
  due = u.due, from = from, to = to, stored = stored })
