// Package batcher merges concurrent heartbeats into batch calls, as a
// gateway does when it handles many connections at once:
//
//	b, err := batcher.New(eng, batcher.Config{})
//	...
//	ack, err := b.Heartbeat(ctx, hb) // from any number of goroutines
//
// Each batch is one HeartbeatBatch call: one script call per user bucket
// (up to about 0.5 ms of beats each) in a round trip of about 1 ms at
// most, instead of one round trip and one script call per beat.
// A batch leaves as soon as a sender is free, and the beats that arrive
// while it is on the wire make the next one (group commit), so an idle
// service adds no latency and a busy one sends fewer, larger calls. Every
// driver gains what rueidis's automatic pipelining gives, and more: Redis
// also runs one script per bucket instead of one per beat.
//
// The core starts no goroutines; this package is where they live, beside
// the sweeper.
package batcher
