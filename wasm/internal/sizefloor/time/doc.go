//go:build wasip1

// Command time is the bare reactor of wasm/internal/sizefloor/bare with
// package time, which the core cannot do without. `go run ./wasm/sizes
// -floor` prints its size beside the other floors: time's initialisation
// brings internal/godebug, and with it internal/bisect and the runtime's
// metrics, into any reactor that uses it.
package main
