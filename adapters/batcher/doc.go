// Package batcher merges concurrent heartbeats into batch calls of any
// Beater:
//
//	b, err := batcher.New(beater, batcher.Config{})
//	...
//	ack, err := b.Heartbeat(ctx, hb) // from any number of goroutines
//
// When to use it: in front of a Beater that does not combine concurrent
// calls itself (core.Model, the WebAssembly host's engine, a *core.Engine
// made with GroupCommit -1), or when beats should wait a Linger for
// company. Not in front of a *core.Engine with group commit on (the
// default): its own Heartbeat merges concurrent calls the same way
// (core.Config.GroupCommit), and it combines statuses, logins, touches
// and the rest too. Stacked on
// such an engine, a batcher adds a queue and a goroutine hand-off to every
// beat and merges nothing the engine would not: call the engine directly.
//
// Each batch is one HeartbeatBatch call: one script call per user bucket
// (up to about 0.5 ms of beats each) in a round trip of about 1 ms at
// most, instead of one round trip and one script call per beat.
// A batch leaves as soon as a sender is free, and the beats that arrive
// while it is on the wire make the next one (group commit), so an idle
// service adds no latency and a busy one sends fewer, larger calls.
//
// The core starts no goroutines; this package is where they live, beside
// the sweeper.
package batcher
