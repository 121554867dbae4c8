//go:build wasip1

// Command sha256 is the bare reactor of wasm/internal/sizefloor/bare with
// crypto/sha256 alone (what abi.SeededRand keys its stream with). `go run
// ./wasm/sizes -floor` prints its size beside the other floors: each of
// crypto/sha1, crypto/sha256 and crypto/rand alone brings nearly all of
// Go's FIPS 140 module.
package main
