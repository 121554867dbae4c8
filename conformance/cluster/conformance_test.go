package cluster

import (
	"testing"
	"time"

	"github.com/presencekit/presence/conformance"
)

// Sizes of the conformance runs on the cluster at scale 1; the everyday
// tier runs a fifth of them and the deep tier half (scale).
const (
	ciSequences = 1000
	ciRace      = 10 * time.Second
)

// TestConformance runs the model-based sequences on a 3-master cluster
// through every adapter. A quarter of the generated configurations spread
// their compact shards over slots (conformance draws Spread per sequence),
// with 1 to 5 scope buckets, so sequences hit every master. Every call goes
// through a slotGuard: no call may name keys of two slots, and no reply may
// be a cross-slot refusal. Nothing may scan the keyspace.
func TestConformance(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, 0)
	resetStats(t, c)
	var guard slotGuard
	opts := conformance.DefaultOptions()
	opts.Sequences = scaled(ciSequences)
	opts.Wrap = guard.wrap
	reports := conformance.Run(t, ClusterTargets(c.Addrs()), opts)
	for _, r := range reports {
		// About one sequence in twenty reads a count twice between sweeps.
		if r.Target == "rueidis/cluster" && r.Passed() && opts.Sequences >= 200 && r.CacheHits == 0 {
			t.Errorf("rueidis/cluster served no count from its client-side cache (%d misses)", r.CacheMisses)
		}
	}
	if n := guard.check(t); n == 0 {
		t.Fatal("the guard saw no calls")
	}
	scanned(t, c)
}

// TestRace runs the race suite on a 3-master cluster, its workers spread
// over the three adapters.
func TestRace(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the race run takes its full duration; skipped in -short mode")
	}
	c := startCluster(t, 0, 0)
	var guard slotGuard
	opts := conformance.DefaultOptions()
	opts.RaceDuration = scaledDur(ciRace)
	opts.Wrap = guard.wrap
	conformance.RunRace(t, ClusterTargets(c.Addrs()), opts)
	guard.check(t)
}
