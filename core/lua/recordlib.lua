-- recordlib.lua: the formats of the user records and the clock, which
-- every user script needs: the core prepends this file to each (before
-- userlib.lua, which the steady beat, heartbeat_steady.lua, does without),
-- so every script stays self-contained for EVAL. Whatever this file
-- defines, the steady beat builds on every call: a table here would cost
-- it more than its own work on a record.
--
-- Device record, in two hash fields so that a heartbeat rewrites only the
-- small part that changes, and both stay under Redis's 64-byte listpack
-- limit in the common case (device IDs hold no control characters, so the
-- \1 and \2 prefixes cannot collide with one). Fields joined by \31:
--   field DEVICE:      kind, gateway, token, loginAt, interval ms,
--                      metadata ("k\30v\30k\30v")
--   field \1 .. DEVICE: lastSeen, lastActive, background 0/1, flags: 1 if
--                      gone (logged out: kept only to refuse its token until
--                      its window ends, the instant lastActive then holds),
--                      plus 2 if the session's start fenced its device
-- Each device has a fence: until it ends, a heartbeat of the device that
-- has no live session and carries a token other than the fence's (any
-- token, when the fence's is "") is refused. A login fences its device with
-- its own token until its login instant + KickFence (refusing the tokens of
-- the device's earlier sessions, whether kicked or already ended), and so
-- does an implicit login under a fence in force (its token becomes the one
-- that may come back); a kick by another device's login fences the kicked
-- device with none; a fence already in force keeps a later end. An implicit
-- login with no fence in force sets none, so that the keys of devices that
-- only ever heartbeat still expire soon after their window (docs/design.md
-- §5). A fence outlives the session records of its device (docs/design.md
-- §8), yet costs a live session nothing: a record flagged as fenced implies
-- the fence its start set, (loginAt + KickFence, token), which is the
-- device's fence while the record is stored, so only a fence that says
-- more than the device's record is written, as a field of its own in the
-- same hash (which every full path reads whole anyway; the steady beat
-- of heartbeat_steady.lua never reads it):
--   field \2 .. DEVICE: fence end ms, the token in force ("" none); written
--                      when the record goes (disconnect, kick, window
--                      passed) before the fence ends, for a kick, or when
--                      the fence ends later than its record implies.
--   field \3: the user's score in the due index while no change is
--                      pending (the state entry's, below, which store in
--                      userlib.lua keeps it equal to, or absent): what a
--                      steady beat checks, so that it reads one key. It
--                      costs about 14 bytes a user.
-- User state (field of the bucket's st hash), fields joined by \31:
--   last published status, pending status ("" none), pending due ms,
--   manual status (MANUAL_* of userlib.lua), manual expiry ms (0 none),
--   the user's score in the due index ("" none). The entry exists while any
--   of these differs from its zero.
-- Statuses are numbered as userlib.lua names them (OFFLINE … DND).

local US = '\31'

local DYN = '\1'
local FENCE = '\2'
local STEADY = '\3'

-- One pattern per record: a single match costs a third of a split.
local STATIC_FIELDS = '^([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)\031?(.*)$'
local DYNAMIC_FIELDS = '^([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)$'
local STATE_FIELDS = '^([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)$'

-- The fields a steady beat reads, and no more, because a capture costs a
-- new string: STEADY_DYNAMIC lastSeen, lastActive, and the background flag
-- and the flags as one string, which the beat writes back as it found
-- them; it matches only a record that is not gone (flags 0, or 2: fenced,
-- which the beat keeps). STEADY_STATIC: gateway, token, interval.
local STEADY_DYNAMIC = '^([^\031]*)\031([^\031]*)\031([01]\031[02])$'
local STEADY_STATIC = '^[^\031]*\031([^\031]*)\031([^\031]*)\031[^\031]*\031([^\031]*)'

local function fmt(n) return string.format('%.0f', n) end

-- stateEntry joins the fields of a user's state entry (above), each a string.
local function stateEntry(pub, pend, due, manual, mexp, idx)
  return pub .. US .. pend .. US .. due .. US .. manual .. US .. mexp .. US .. idx
end

-- clock returns arg as the current instant, or the server's clock when arg is "".
-- Arithmetic parses a numeric string once, where tonumber parses it twice.
local function clock(arg)
  if arg ~= '' then return arg + 0 end
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
