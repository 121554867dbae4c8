package rig

import (
	"testing"

	"go.uber.org/goleak"
)

// CheckLeaks fails the test if, once every cleanup registered after this
// call has run (clients closed, servers stopped), a goroutine started
// during the test is still running. Call it first in the test.
func CheckLeaks(tb testing.TB) {
	tb.Helper()
	before := goleak.IgnoreCurrent()
	tb.Cleanup(func() {
		if err := goleak.Find(before); err != nil {
			tb.Errorf("rig: goroutines outlived the test: %v", err)
		}
	})
}
