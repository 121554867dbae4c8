package core_test

import (
	"context"
	"testing"
	"time"

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

// TestReleasedPlansAreReused: a driver of its own that hands each ended
// heartbeat plan back (Planner.Release) steps steady beats without
// allocating, and one that does not allocates each plan.
func TestReleasedPlansAreReused(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector, sync.Pool drops a share of what it is given")
	}
	pl, err := core.NewPlanner(core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store := newCannedStore(1)
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	hb := core.Heartbeat{User: "user-1234", Device: "phone", Kind: core.KindIOS, Token: "f00dfeedf00dfeed", Active: true}
	beat := func(release bool) {
		s := pl.Plan(&hb, now) // a pointer: an Op value boxed would be an allocation of the caller's
		for !s.Done() {
			if err := s.Step(store.Eval(ctx, s.Calls())); err != nil {
				t.Fatal(err)
			}
		}
		if ack, err := s.(core.Plan[core.Ack]).Outcome(); err != nil || ack.Token == "" {
			t.Fatalf("%+v, %v", ack, err)
		}
		if release {
			pl.Release(s)
		}
	}
	if n := testing.AllocsPerRun(200, func() { beat(true) }); n != 0 {
		t.Errorf("a released plan's beat allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() { beat(false) }); n < 1 {
		t.Errorf("a beat whose plan is kept allocates %v times, want at least its plan", n)
	}
}
