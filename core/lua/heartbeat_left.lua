-- heartbeat_left.lua: the end of heartbeat_steady.lua, after userlib.lua
-- and heartbeat_full.lua, which it joins in a function of its own, made
-- and called only when the steady beat left a beat (luabuild). Returns the
-- steady beat's reply, then what heartbeat_full.lua returns: now, the
-- results and the loss it found.
end)(fullArgv, fullKeys)
return { reply, decided[1], decided[2], decided[3] }
