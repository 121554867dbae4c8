package conformance_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// TestCountAfterOwnSweepIsFresh: on a real server the rueidis Store serves
// compact counts through its client-side cache. The invalidation of a count
// key that the engine's own sweep rewrote travels apart from the sweep's
// reply and often arrives after it; SweepScopes fences the cache before it
// returns, so a count read after it sees the sweep (docs/design.md §9: the
// cache is "invalidated by the server when the sweep rewrites it").
//
// Input: a compact class (Shards 4); repeat 20 times: Touch(video/v1, m<i>),
// clock +1.001 s, SweepScopes, Count, Count. Both counts of round i are i.
// Without the fence the first count after a sweep is often i-1, most runs
// within a few rounds.
func TestCountAfterOwnSweepIsFresh(t *testing.T) {
	t.Parallel()
	srv := redistest.Server(t)
	ctx := context.Background()
	var tg conformance.Target
	for _, x := range conformance.AdapterTargets(srv.Addr) {
		if x.Adapter == "rueidis" {
			tg = x
		}
	}
	be, err := tg.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	eng, err := core.New(be.Store, core.Config{Prefix: "cached-count", Clock: func() time.Time { return now },
		Classes: map[string]core.ScopeClass{"video": {Layout: core.LayoutCompact, Window: time.Minute, SweepInterval: time.Second, Shards: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	sc := core.Scope{Class: "video", ID: "v1"}
	for i := 1; i <= 20; i++ {
		if err := eng.Touch(ctx, sc, "m"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		now = now.Add(1001 * time.Millisecond)
		if _, err := eng.SweepScopes(ctx); err != nil {
			t.Fatal(err)
		}
		for read := 0; read < 2; read++ { // the second read is served from the cache
			c, err := eng.Count(ctx, sc)
			if err != nil {
				t.Fatal(err)
			}
			if c.N != int64(i) {
				t.Fatalf("after %d touches and a sweep, read %d of the count gave %d", i, read+1, c.N)
			}
		}
	}
	st := be.Store.(interface{ CacheStats() (uint64, uint64) })
	hits, misses := st.CacheStats()
	if hits == 0 {
		t.Fatalf("no count was served from the client-side cache (%d misses)", misses)
	}
	t.Logf("client-side cache: %d hits, %d misses", hits, misses)
}
