// Package serverclock follows the Redis server's clock from the client: the
// driver-side clock of docs/design.md §4. A Clock reads the server's time
// now and then (Engine.Ping) and keeps the offset, so that every script
// takes "now" as an argument instead of reading TIME itself:
//
//	clk, err := serverclock.New(serverclock.Config{})
//	eng, err := core.New(store, core.Config{Clock: clk.Now})
//	err = clk.Sync(ctx, eng)  // before the first call that needs the time
//	go clk.Run(ctx, eng, nil) // re-reads it every Config.Every
//
// Hosts whose own clocks disagree still agree on "now", within half a
// round trip and a millisecond, because they all follow the server's. A
// script then skips its TIME call, a small share of the server time a
// single steady beat costs (docs/performance.md). The engine's
// default, a nil core.Config.Clock, has each script read TIME, and needs
// no goroutine.
//
// The core starts no goroutines and reads no clock of its own; this package
// is where both live, beside the batcher and the sweeper.
package serverclock
