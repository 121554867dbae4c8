//go:build wasip1

package core

import "syscall"

// cryptoRand is the token source when Config.Rand is nil: WASI's
// random_get, which is what crypto/rand reads on wasip1 outside FIPS 140
// mode. Importing crypto/rand would link its package and the DRBG of its
// FIPS mode into the WebAssembly module for nothing.
var cryptoRand = wasiRand{}

type wasiRand struct{}

func (wasiRand) Read(b []byte) (int, error) {
	if err := syscall.RandomGet(b); err != nil {
		return 0, err
	}
	return len(b), nil
}
