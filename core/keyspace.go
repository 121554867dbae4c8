//go:build !(js || wasip1)

package core

import "github.com/presencekit/presence/internal/keyspace"

// init hands package keyspace the engine's key names and scripts, the one
// way into them. The WebAssembly modules, where no tool reads them, leave
// it out, and with it the code that only tools run.
func init() {
	keyspace.Register(func(e any) keyspace.Names { return keyNames{e.(*Engine)} }, scriptList)
}
