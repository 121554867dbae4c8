//go:build wasip1

// Command crypto is the bare reactor of wasm/internal/sizefloor/bare with
// the two uses of the standard library's crypto that the core makes: a
// SHA-1 (the page hints and the layout, as Redis's sha1hex) and random
// bytes from crypto/rand (the tokens). `go run ./wasm/sizes -floor`
// prints its size: what those packages bring into the module, Go's FIPS
// 140 module with them.
package main
