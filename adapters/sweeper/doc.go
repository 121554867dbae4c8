// Package sweeper runs an engine's sweeps on a timer. The core itself
// starts no goroutines and reads no clock; this package is the loop a
// service runs beside it:
//
//	go sweeper.Run(ctx, eng, sweeper.Options{})
//
// Run it on every instance: the engine's token-checked locks keep two
// sweepers from doing the same work, and correctness never depends on them.
package sweeper
