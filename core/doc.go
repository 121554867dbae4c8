// Package core is the presence engine: the semantics of user presence and
// scope counters, input validation, the Redis key layout, the Lua scripts that
// apply every state change atomically, reply decoding, and an in-memory
// reference model of the same rules.
//
// The core is pure Go with no dependency outside the standard library, and it
// builds for GOOS=wasip1 and GOOS=js. It starts no goroutines and reads no
// hidden clock: time comes from the Redis server (the scripts read TIME) or
// from an injected clock (Config.Clock), and Redis is reached only through
// the small [Store] interface that the adapters under adapters/ implement.
//
// A minimal program builds an [Engine] over an adapter and sends heartbeats:
//
//	eng, err := core.New(goredis.New(client), core.Config{})
//	ack, err := eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "phone", Kind: core.KindIOS})
//	st, err := eng.Status(ctx, "alice")
//
// The normative semantics are in the project's design document; the
// comments on each operation state the rule it applies.
package core
