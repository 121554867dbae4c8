//go:build wasip1

// Command rand is the bare reactor of wasm/internal/sizefloor/bare with
// crypto/rand alone. `go run ./wasm/sizes -floor` prints its size beside
// the other floors: each of crypto/sha1, crypto/sha256 and crypto/rand
// alone brings nearly all of Go's FIPS 140 module.
package main
