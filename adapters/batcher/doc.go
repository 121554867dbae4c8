// Package batcher merges concurrent heartbeats into batch calls of any
// Beater:
//
//	b, err := batcher.New(beater, batcher.Config{})
//	...
//	ack, err := b.Heartbeat(ctx, hb) // from any number of goroutines
//
// A *core.Engine needs none: its own Heartbeat merges concurrent calls
// the same way (group commit, core.Config.GroupCommit), without the
// batcher's goroutines, and combines statuses, logins, touches and the
// rest too. The batcher remains for Beaters that do not combine calls
// themselves (core.Model, the WebAssembly host's engine, an engine with
// GroupCommit -1) and for callers who want a Linger.
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
