//go:build wasip1

// Command sha1 is the bare reactor of wasm/internal/sizefloor/bare with
// crypto/sha1 alone, which the core cannot do without (its page hints and
// compact scopes hash as Redis's sha1hex does). `go run ./wasm/sizes
// -floor` prints its size beside the other floors: crypto/sha1 alone
// brings nearly all of Go's FIPS 140 module, whose packages register
// their self-tests (and so keep their algorithms) in their init functions.
package main
