//go:build !wasip1

package core

import "crypto/rand"

// cryptoRand is the token source when Config.Rand is nil.
var cryptoRand = rand.Reader
