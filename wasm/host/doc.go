// Package host runs the presence WebAssembly module (wasm/module) on
// wazero, a pure-Go WebAssembly runtime, and drives its plans (ABI v2)
// over any core.Store: miniredis, or a real server through any adapter.
// The module imports nothing from the host; the host runs the script
// calls each plan waits for and resumes it with their results.
//
// A Runtime compiles the module once; each NewInstance is an independent
// instance (its own memory, its own engine), as an edge node would run one.
// Instance.Configure returns an Engine, whose Do runs any core.Op by
// calling into the module (it implements core.Presence), so anything
// written against the native engine's door (tests, tools, the simulator)
// can drive the WebAssembly one:
//
//	rt, err := host.NewRuntime(ctx, wasmBytes, host.Options{})
//	defer rt.Close(ctx)
//	in, err := rt.NewInstance(ctx, goredis.New(client))
//	eng, err := in.Configure(ctx, core.Config{Clock: clock.Now}, host.EngineOptions{})
//	v, err := eng.Do(ctx, core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb})
//	ack := v.(core.Ack)
//
// Engine.Run (Instance.Run) runs many operations as plans in flight
// together in one instance: each round sends the calls of every waiting
// plan to the store in one Eval.
//
// The module is built from source with package wasm (wasm.Build).
package host
