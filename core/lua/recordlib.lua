-- recordlib.lua: the user records' layout (version 2) and the clock, which
-- every user script needs: the core prepends this file to each (before
-- userlib.lua, which the steady beat, heartbeat_steady.lua, does without),
-- so every script stays self-contained for EVAL. Whatever this file
-- defines, the steady beat builds on every call: a table here would cost
-- it more than its own work on a record.
--
-- Keys of one user bucket (all in its hash tag, so in one cluster slot):
--   meta   hash  v: the layout version, L and s: the pages' level and
--                split pointer (below); never expires, so that no page is
--                ever looked for in the wrong place
--   pages  hash  one per page ("P:{uB}:p:N"): user → static record and
--                DYN .. user → dynamic record (below); each page stays in
--                listpack encoding (at most PAGE_USERS users, values of at
--                most PAGE_VALUE bytes); expires KEEP after its last write
--   big    hash  the same two fields, for users whose records are longer
--                than PAGE_VALUE (many devices, metadata) or whose page is
--                full; same expiry
--   man    hash  user → manual status US manual expiry ms (0 none): kept
--                apart so that it outlives the pages, until cleared
--   due    zset  PAGE .. N (a page) or a user of big → the next instant
--                it needs a sweep, or earlier (never later)
--
-- Pages are found by linear hashing, so that their number follows the
-- users without any setting: user u has hash h (the first 32 bits of its
-- SHA1) and lives in page h mod 2^L, or h mod 2^(L+1) when that is below s.
-- A new user in a page of SPLIT_AT users or more splits page s in two
-- (userlib.lua's splitPage) and moves s on.
--
-- A user's two records join fields by US (\31) and items by IS (\29).
-- The static record, which only a beat's full path rewrites: the
-- published status (followed by MANUAL_EXPIRES and the expiry ms while a
-- manual status with an expiry is set, which the steady beat must then
-- leave to the full path once passed), then, for each device, IS and
--   device ID, bits (1 background + 2 gone + 4 fenced), kind, gateway,
--   token, interval ms, loginAt (hex ms), and, if it has any, metadata
--   ("k\30v\30k\30v")
-- and, for each device whose fence says more than its record implies, IS,
-- FENCE (\2) and device ID, fence end ms, the token in force ("" none).
-- The dynamic record, which every beat rewrites: the pending status and
-- its due ms ("" and "" none), then, for each device in the static
-- record's order, IS and lastSeen (hex ms) US lastSeen - lastActive (ms).
-- The split keeps both under PAGE_VALUE for a device with an ID, gateway
-- and token of common lengths, however long its session or its idleness.
-- A gone (logged-out) device is kept only to refuse its token until its
-- window ends, the instant lastActive then holds.
--
-- Each device has a fence: until it ends, a heartbeat of the device that
-- has no live session and carries a token other than the fence's (any
-- token, when the fence's is "") is refused. A login fences its device with
-- its own token until its login instant + KickFence (refusing the tokens of
-- the device's earlier sessions, whether kicked or already ended), and so
-- does an implicit login under a fence in force (its token becomes the one
-- that may come back); a kick by another device's login fences the kicked
-- device with none; a fence already in force keeps a later end. An implicit
-- login with no fence in force sets none. A fence outlives the session
-- records of its device (docs/design.md §8), yet costs a live session
-- nothing: a record flagged as fenced implies the fence its start set,
-- (loginAt + KickFence, token), so only a fence that says more than the
-- device's record is written, as an item of its own.
-- A status is a number, as core.Status numbers it.

local US = '\31'
local IS = '\29'
local RS = '\30' -- the steady beat's reply: tokens RS geometry
local DYN = '\1'
local FENCE = '\2'
local PAGE = '\1' -- a page's member in the due index: PAGE .. N
local MANUAL_EXPIRES = 'm'

-- The statuses (StatusOffline, …), manual statuses (ManualNone, …), kinds
-- (KindWeb, …, each a string, as arguments and records hold it), login
-- policies (PolicyMulti, …) and scope layouts (LayoutExact, …, each a
-- string) are package core's constants, named as Go names them
-- (status.go): no Lua file defines them, and go generate ./core writes
-- their numbers in (core/internal/luabuild).

local LAYOUT = '2'      -- the version of this layout, in meta's field v
local PAGE_VALUE = 64   -- hash-max-listpack-value of Redis's default configuration
local PAGE_USERS = 60   -- two fields each: 120 entries, a short scan, under hash-max-listpack-entries (512)
local SPLIT_AT = 40     -- a new user in a page this full splits a page

-- The fields a steady beat reads of a device's static item, and no
-- more, because a capture costs a new string: device ID, bits, gateway,
-- token, interval, and US if metadata follows; and of its dynamic item:
-- lastSeen and lastSeen - lastActive.
local STEADY_STATIC = '^([^\031]*)\031([0-7])\031[^\031]*\031([^\031]*)\031([^\031]*)\031([^\031]*)\031[^\031]*(\031?)'
local STEADY_DYNAMIC = '^([^\031]*)\031([^\031]*)$'
-- The records of a user with one device, nothing pending and no manual
-- expiry, as the steady beat's single path takes them: the dynamic one
-- whole (lastSeen, lastSeen - lastActive), the static one after its
-- device ID (token and interval; its bits are read as a byte; no
-- metadata, no fence).
local SINGLE_DYNAMIC = '^\031\029(%x+)\031(%-?%d+)$'
local SINGLE_STATIC = '^\031[0-7]\031[^\031]*\031[^\031]*\031([^\031]*)\031(%d+)\031%x+$'
-- A device ID longer than this leaves no room in a page for its records
-- with an 11-character token, a 30 s interval and 11-digit instants, so
-- the steady beat looks for them in the big hash first.
local LONG_ID = 26

local function fmt(n) return string.format('%.0f', n) end

-- Instants of the records are written in hexadecimal (11 digits where
-- decimal takes 13), which keeps a record within a listpack value.
local function hex(n) return string.format('%x', n) end
local function unhex(s) return tonumber(s, 16) end

-- clock returns arg as the current instant, or the server's clock when arg is "".
-- Arithmetic parses a numeric string once, where tonumber parses it twice.
local function clock(arg)
  if arg ~= '' then return arg + 0 end
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- layoutError raises the error the engine reports as ErrLayout.
local function layoutError(found)
  error('PRESENCE_LAYOUT keys of layout ' .. found .. ' where this engine writes layout ' .. LAYOUT, 0)
end

-- hashOf is the user's page hash: 32 bits of its SHA1, the same in every
-- script and engine.
local function hashOf(user) return tonumber(string.sub(redis.sha1hex(user), 1, 8), 16) end

-- pageOf is the page of hash h at level L, split pointer s.
local function pageOf(h, L, s)
  local n = 2 ^ L
  local p = h % n
  if p < s then p = h % (2 * n) end
  return p
end
