// Package guest is what runs inside a presence WebAssembly module: it
// reads ABI requests (package abi), runs each as a plan (core.Planner),
// and writes the responses: a plan's result (with the messages to
// publish) or the script calls it waits for, tagged with the plan's ID,
// which the host runs and answers with a resume request. It does no I/O;
// the module's glue code (wasm/module for WASI, wasm/jsmodule for
// JavaScript) only moves bytes in and out.
//
// The package is plain Go and runs natively as well, which is how its
// tests exercise it without a WebAssembly runtime:
//
//	g := guest.New()
//	resp := g.Handle([]byte(`{"v":2,"op":"configure","args":{}}`))
//	resp = g.Handle([]byte(`{"v":2,"op":"heartbeat","now":1767225600000,"args":{"user":"alice","device":"web","kind":"web"}}`))
//	// resp: {"v":2,"plan":1,"calls":[…]}; run the calls, then
//	resp = g.Handle([]byte(`{"v":2,"op":"resume","now":1767225600002,"args":{"plan":1,"results":[…]}}`))
package guest
