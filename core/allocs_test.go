package core_test

import (
	"context"
	"testing"

	"github.com/presencekit/presence/core"
)

// TestSteadyBeatAllocatesNothing: a steady heartbeat through the engine
// allocates nothing of its own (docs/design.md §2), with group commit and
// without; the store here answers without allocating.
func TestSteadyBeatAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector, sync.Pool drops a share of what it is given")
	}
	ctx := context.Background()
	hb := core.Heartbeat{User: "user-1234", Device: "phone", Kind: core.KindIOS, Token: "f00dfeedf00dfeed", Active: true}
	for _, tc := range []struct {
		name  string
		group int
	}{{"group commit", 0}, {"alone", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := core.New(newCannedStore(1), core.Config{GroupCommit: tc.group})
			if err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(200, func() {
				if _, err := e.Heartbeat(ctx, hb); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("a steady heartbeat allocates %v times, want 0", allocs)
			}
		})
	}
}
