//go:build wasip1

// Command crypto is the bare reactor of wasm/internal/sizefloor/bare with
// the three packages of the standard library's crypto that the core and
// the ABI can use: a SHA-1 (the page hints and the layout, as Redis's
// sha1hex), a SHA-256 (abi.SeededRand's key) and random bytes from
// crypto/rand (the native engine's tokens). `go run ./wasm/sizes -floor`
// prints its size: what those packages bring into a reactor, Go's FIPS 140
// module with them.
package main
