package core_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// TestCompactSweepSeesChangesMidSweep sweeps a self-sized compact scope
// whose sweep takes several steps (its due shards exceed one step's
// budget, and it shrinks by merges) and, between the first step and the
// rest, lets another engine touch new members into it (splitting shards),
// or remove a live one. The count after the sweep must be the members that
// are there, neither counted twice nor lost, and the members listed must be
// the model's after the same operations (the mid-sweep ones at the same
// instant, before the sweep); a scope holding a member is never released.
func TestCompactSweepSeesChangesMidSweep(t *testing.T) {
	const budget = 16
	tests := []struct {
		name          string
		size          int // ShardSize
		expired, live int
		joins         int  // members touched mid-sweep
		leave         bool // a live member leaves mid-sweep
		wantReleased  int
	}{
		{"no change", 4, 80, 12, 0, false, 0},
		{"members join mid-sweep", 4, 80, 12, 30, false, 0},
		{"a member leaves mid-sweep", 4, 80, 12, 0, true, 0},
		{"members join an emptied scope", 2, 80, 0, 5, false, 0},
		{"nothing joins an emptied scope", 2, 80, 0, 0, false, 1},
		{"one shard a member", 1, 60, 3, 7, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			_, c := realClient(t)
			clk := &manualClock{t: t0}
			cfg := scopeConfigSpread(tt.size, false)
			cfg.SweepBudget, cfg.ReleaseAfter, cfg.Clock = budget, 1, clk.Now
			newEngine := func(s core.Store) *core.Engine {
				e, err := core.New(s, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			mcfg := cfg
			mcfg.Clock, mcfg.Rand = clk.Now, nil
			model, err := core.NewModel(mcfg)
			if err != nil {
				t.Fatal(err)
			}
			other := newEngine(goredis.New(c))
			rec := &recorder{inner: goredis.New(c)}
			e := newEngine(rec)
			if _, err := e.SweepScopes(ctx); err != nil { // loads the script
				t.Fatal(err)
			}
			var old, fresh, late []core.ScopeTouch
			for i := 0; i < tt.expired+tt.live; i++ {
				ts := core.ScopeTouch{Scope: video, Member: fmt.Sprint("m", i)}
				if i < tt.expired {
					old = append(old, ts)
				} else {
					fresh = append(fresh, ts)
				}
			}
			for i := 0; i < tt.joins; i++ {
				late = append(late, core.ScopeTouch{Scope: video, Member: fmt.Sprint("late", i)})
			}
			both := func(f func(p core.Presence)) {
				f(e)
				f(model)
			}
			both(func(p core.Presence) { touchAll(t, p, old) })
			clk.t = clk.t.Add(45 * time.Second)
			both(func(p core.Presence) { touchAll(t, p, fresh) })
			clk.t = clk.t.Add(20 * time.Second) // the old ones are past their 60 s window
			midSweep := func(p core.Presence) {
				touchAll(t, p, late)
				if tt.leave {
					if ok, err := opdo.Do[bool](ctx, p, core.Leave{Scope: video, Member: fresh[0].Member}); err != nil || !ok {
						t.Fatalf("leave: %v, %v", ok, err)
					}
				}
			}
			midSweep(model)
			mr, err := opdo.Do[core.SweepReport](ctx, model, core.SweepScopes{})
			if err != nil {
				t.Fatal(err)
			}
			steps := 0
			rec.before = func(calls []core.Call) error {
				if scriptOf(calls[0]) != "sweep_scopes" {
					return nil
				}
				if steps++; steps == 2 {
					midSweep(other)
				}
				return nil
			}
			r, err := e.SweepScopes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rec.before = nil
			if steps < 3 {
				t.Fatalf("the sweep took %d steps; the test needs several", steps)
			}
			if r.Released != tt.wantReleased || mr.Released != tt.wantReleased {
				t.Fatalf("released %d scopes (model %d), want %d", r.Released, mr.Released, tt.wantReleased)
			}
			want := int64(tt.live + tt.joins)
			if tt.leave {
				want--
			}
			for _, p := range []core.Presence{e, model} {
				if got := countOf(t, p); got != want {
					t.Fatalf("%T: count after the sweep: %d, want %d", p, got, want)
				}
			}
			if got, wantM := allMembers(t, e), allMembers(t, model); fmt.Sprint(got) != fmt.Sprint(wantM) {
				t.Fatalf("members after the sweep:\n%v\nmodel:\n%v", got, wantM)
			}
			clk.t = clk.t.Add(10 * time.Second)
			both(func(p core.Presence) {
				if _, err := opdo.Do[core.SweepReport](ctx, p, core.SweepScopes{}); err != nil {
					t.Fatal(err)
				}
				if got := countOf(t, p); got != want {
					t.Fatalf("%T: count after the next sweep: %d, want %d", p, got, want)
				}
			})
		})
	}
}

// allMembers lists every member of video, page by page, sorted.
func allMembers(t *testing.T, p core.Presence) []string {
	t.Helper()
	var out []string
	cursor := ""
	for {
		page, err := opdo.Do[core.MemberPage](context.Background(), p, core.ReadMembers{Scope: video, Cursor: cursor, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Members {
			out = append(out, m.ID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	sort.Strings(out)
	return out
}

func touchAll(t *testing.T, p core.Presence, ts []core.ScopeTouch) {
	t.Helper()
	for lo := 0; lo < len(ts); lo += core.MaxBatch {
		hi := lo + core.MaxBatch
		if hi > len(ts) {
			hi = len(ts)
		}
		if err := opdo.Err(context.Background(), p, core.TouchBatch(ts[lo:hi])); err != nil {
			t.Fatal(err)
		}
	}
}

func countOf(t *testing.T, p core.Presence) int64 {
	t.Helper()
	c, err := opdo.Do[core.Count](context.Background(), p, core.ReadCount{Scope: video})
	if err != nil {
		t.Fatal(err)
	}
	return c.N
}
