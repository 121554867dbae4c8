// Package guest is what runs inside a presence WebAssembly module: it
// reads ABI requests (package abi), runs them on a core.Engine, and writes
// the responses. The engine's store sends its script calls to the host
// through the Host interface, which the module's glue code implements with
// imported functions (wasm/module for WASI, wasm/jsmodule for JavaScript).
//
// The package is plain Go and runs natively as well, which is how its
// tests exercise it without a WebAssembly runtime:
//
//	g := guest.New(h) // h forwards script requests to Redis
//	resp := g.Handle(ctx, []byte(`{"v":1,"op":"configure","args":{}}`))
//	resp = g.Handle(ctx, []byte(`{"v":1,"op":"heartbeat","now":1767225600000,"args":{"user":"alice","device":"web","kind":"web"}}`))
package guest
