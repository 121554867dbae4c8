package conformance_test

import (
	"testing"

	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/internal/redistest"
)

// The suite proper, at the sizes of DefaultOptions: at least 2,000
// sequences for each adapter on miniredis and on a real redis-server, and a
// 30-second race run; PRESENCE_CONFORMANCE_SCALE multiplies both.

func TestSequencesMiniredis(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.MiniredisTargets(), conformance.DefaultOptions())
}

func TestSequencesRedisServer(t *testing.T) {
	t.Parallel()
	srv := redistest.Server(t) // skips where redis-server is not installed
	conformance.Run(t, conformance.AdapterTargets(srv.Addr), conformance.DefaultOptions())
}

func TestRace(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the race run takes its full duration; skipped in -short mode")
	}
	srv := redistest.Server(t)
	conformance.RunRace(t, conformance.AdapterTargets(srv.Addr), conformance.DefaultOptions())
}
