// Package luascripts holds the engine's Lua scripts as Redis runs them,
// with their SHA1s: go generate ./core writes scripts_gen.go from
// core/lua/*.lua and core/status.go (core/internal/luabuild), so that no
// text work is left for run time. Package core sends them (by SHA1, by
// source after a NOSCRIPT); the tests, the fuzz targets, the benchmarks
// and wasm/sizes read them here, to preload, recognise or measure them.
// It is plain data: nothing registers, nothing changes at run time.
package luascripts

import "strings"

// Script is one Lua script of the engine.
type Script struct {
	// Name is the name tests and tools know the script by: its file's name
	// without ".lua", but "beat" for heartbeat_steady.lua and "heartbeat"
	// for heartbeat_full.lua.
	Name string
	// SHA is the hex SHA1 of the source, as EVALSHA takes it.
	SHA string
	// Parts are the texts the source joins: its helper files (recordlib,
	// userlib, scopelib), then its own file, as Redis runs them.
	Parts []string
}

// Source returns the full source, as EVAL takes it. It joins Parts on
// every call; package core joins each script once, when it first sends
// it whole.
func (s Script) Source() string { return strings.Join(s.Parts, "") }

// Named returns the script whose Name is name, and false if none has it.
func Named(name string) (Script, bool) {
	for _, s := range All() {
		if s.Name == name {
			return s, true
		}
	}
	return Script{}, false
}
