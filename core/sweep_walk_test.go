package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestCompactWalkSeesChangesMidWalk sweeps a compact scope whose walk takes
// several steps and, between the first step and the rest, lets another
// engine touch a new member into, or remove one from, the shard the walk
// has already passed. The sweep's count must include that change and a scope
// holding a member must not be released; a sweep that only summed the
// shards as it walked them would miss both. With more shards than one step
// may count again, the sweep keeps its sum and does not count as an empty
// one, and the next sweep counts right.
func TestCompactWalkSeesChangesMidWalk(t *testing.T) {
	const budget = 16
	tests := []struct {
		name          string
		shards        int
		expired, live int            // members per shard before the sweep
		midWalk       func(*meddler) // runs after the walk's first step
		wantCount     int64          // after the sweep
		wantReleased  int            // by the sweep
		wantNextCount int64          // after a second sweep, nothing changed
	}{
		{"no change", 4, 20, 3, nil, 12, 0, 12},
		{"a member joins a walked shard", 4, 20, 3, func(e *meddler) { e.touch(e.shard0New) }, 13, 0, 13},
		{"a member leaves a walked shard", 4, 20, 3, func(e *meddler) { e.leave(e.shard0Live) }, 11, 0, 11},
		{"a member joins an emptied scope", 4, 20, 0, func(e *meddler) { e.touch(e.shard0New) }, 1, 0, 1},
		{"nothing joins an emptied scope", 4, 20, 0, nil, 0, 1, 0},
		{"a member joins an emptied scope of many shards", 600, 1, 0, func(e *meddler) { e.touch(e.shard0New) }, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			_, c := realClient(t)
			clk := &manualClock{t: t0}
			cfg := scopeConfigSpread(tt.shards, false)
			cfg.SweepBudget, cfg.ReleaseAfter, cfg.Clock = budget, 1, clk
			newEngine := func(s core.Store) *core.Engine {
				e, err := core.New(s, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			other := &meddler{t: t, e: newEngine(goredis.New(c))}
			rec := &recorder{inner: goredis.New(c)}
			e := newEngine(rec)
			// load the sweep script, so that every step below is one call
			if _, err := e.SweepScopes(ctx); err != nil {
				t.Fatal(err)
			}

			// members m<shard>-<i> of every shard: find names per shard
			byShard := membersByShard(t, e, tt.shards, tt.expired+tt.live)
			var old, fresh []core.ScopeTouch
			for s, names := range byShard {
				for i, m := range names {
					if i < tt.expired {
						old = append(old, core.ScopeTouch{Scope: video, Member: m})
					} else {
						fresh = append(fresh, core.ScopeTouch{Scope: video, Member: m})
						if s == 0 && other.shard0Live == "" {
							other.shard0Live = m
						}
					}
				}
			}
			for i := 0; other.shard0New == ""; i++ {
				if n, err := e.Keys().ShardOf(video, fmt.Sprint("late", i)); err == nil && n == 0 {
					other.shard0New = fmt.Sprint("late", i)
				}
			}
			touchAll(t, e, old)
			clk.t = clk.t.Add(45 * time.Second)
			touchAll(t, e, fresh)
			clk.t = clk.t.Add(20 * time.Second) // the old ones are past their 60 s window
			steps := 0
			rec.before = func(calls []core.Call) error {
				if scriptOf(calls[0]) != "sweep_scopes" {
					return nil
				}
				if steps++; steps == 2 && tt.midWalk != nil {
					tt.midWalk(other)
				}
				return nil
			}
			r, err := e.SweepScopes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rec.before = nil
			if steps < 3 {
				t.Fatalf("the walk took %d steps; the test needs several", steps)
			}
			if r.Released != tt.wantReleased {
				t.Fatalf("released %d scopes, want %d", r.Released, tt.wantReleased)
			}
			if got := countOf(t, e); got != tt.wantCount {
				t.Fatalf("count after the sweep: %d, want %d", got, tt.wantCount)
			}
			clk.t = clk.t.Add(10 * time.Second)
			if _, err := e.SweepScopes(ctx); err != nil {
				t.Fatal(err)
			}
			if got := countOf(t, e); got != tt.wantNextCount {
				t.Fatalf("count after the next sweep: %d, want %d", got, tt.wantNextCount)
			}
		})
	}
}

// meddler is the engine that changes the scope in the middle of a walk.
type meddler struct {
	t          *testing.T
	e          *core.Engine
	shard0Live string // a live member of shard 0, the first walked
	shard0New  string // a new member of shard 0
}

func (x *meddler) touch(member string) {
	x.t.Helper()
	if err := x.e.Touch(context.Background(), video, member); err != nil {
		x.t.Fatal(err)
	}
}

func (x *meddler) leave(member string) {
	x.t.Helper()
	if ok, err := x.e.Leave(context.Background(), video, member); err != nil || !ok {
		x.t.Fatalf("leave %s: %v, %v", member, ok, err)
	}
}

// membersByShard returns n member names for each of the scope's shards.
func membersByShard(t *testing.T, e *core.Engine, shards, n int) [][]string {
	t.Helper()
	out := make([][]string, shards)
	full := 0
	for i := 0; full < shards; i++ {
		m := fmt.Sprint("m", i)
		s, err := e.Keys().ShardOf(video, m)
		if err != nil {
			t.Fatal(err)
		}
		if len(out[s]) < n {
			if out[s] = append(out[s], m); len(out[s]) == n {
				full++
			}
		}
	}
	return out
}

func touchAll(t *testing.T, e *core.Engine, ts []core.ScopeTouch) {
	t.Helper()
	for lo := 0; lo < len(ts); lo += core.MaxBatch {
		hi := lo + core.MaxBatch
		if hi > len(ts) {
			hi = len(ts)
		}
		if err := e.TouchBatch(context.Background(), ts[lo:hi]); err != nil {
			t.Fatal(err)
		}
	}
}

func countOf(t *testing.T, e *core.Engine) int64 {
	t.Helper()
	c, err := e.Count(context.Background(), video)
	if err != nil {
		t.Fatal(err)
	}
	return c.N
}
