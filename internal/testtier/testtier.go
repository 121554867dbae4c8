// Package testtier tells a test which of the two tiers runs it.
//
// The everyday tier is the README's test command, go test ./... ./cmd/...:
// every package, at sizes that still catch each planted bug of the teeth
// tests, within a few minutes on two cores. The deep tier runs when
// PRESENCE_DEEP=1 is set (usually with -race): the conformance suites at
// scale, longer race and soak runs, larger property tests. A test sizes
// itself with Pick:
//
//	sequences := testtier.Pick(300, 5000)
//
// and a test that only makes sense at depth skips itself with SkipUnlessDeep.
package testtier

import (
	"os"
	"testing"
)

// Env is the environment variable that selects the deep tier: "1" runs it,
// anything else (or unset) the everyday tier.
const Env = "PRESENCE_DEEP"

// Deep reports whether the deep tier was asked for.
func Deep() bool { return os.Getenv(Env) == "1" }

// Pick returns everyday at the everyday tier and deep at the deep tier.
func Pick[T any](everyday, deep T) T {
	if Deep() {
		return deep
	}
	return everyday
}

// SkipUnlessDeep skips tb at the everyday tier, saying why and how to run
// it.
func SkipUnlessDeep(tb testing.TB, why string) {
	tb.Helper()
	if !Deep() {
		tb.Skipf("deep tier only (%s=1): %s", Env, why)
	}
}
