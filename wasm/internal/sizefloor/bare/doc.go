//go:build wasip1

// Command bare is the smallest WASI reactor Go builds: one export that
// allocates, nothing of the presence module. `go run ./wasm/sizes -floor`
// prints its size, the part of the module's size that is Go's runtime.
package main
