package shown_test

import (
	"slices"
	"testing"

	"github.com/presencekit/presence/cmd/internal/shown"
	"github.com/presencekit/presence/core"
)

// TestStatuses: the people at the screen first, every status but OFFLINE
// once.
func TestStatuses(t *testing.T) {
	got := shown.Statuses()
	want := []core.Status{core.StatusOnline, core.StatusAway, core.StatusDND, core.StatusPushOnline}
	if !slices.Equal(got[:len(want)], want) {
		t.Errorf("Statuses() = %v, want %v first", got, want)
	}
	seen := map[core.Status]bool{}
	for _, s := range got {
		if s == core.StatusOffline || seen[s] {
			t.Errorf("Statuses() = %v: OFFLINE or a repeat", got)
		}
		seen[s] = true
	}
	for s := core.StatusOffline + 1; s < 64; s++ {
		if _, ok := core.Parse[core.Status](s.String()); ok && !seen[s] {
			t.Errorf("Statuses() = %v misses %v", got, s)
		}
	}
}
