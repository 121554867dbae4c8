package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// scopeConfig has one class of each layout with a 60 s window and a 10 s
// sweep interval, and few shards so that paging crosses shards.
func scopeConfig(shards int) core.Config { return scopeConfigSpread(shards, false) }

// scopeConfigSpread is scopeConfig with the compact class's shards spread
// over cluster slots or kept together.
// A compact class that does not spread sizes its scopes itself: there
// shards is the ShardSize (at most 200), so that small ones resize often.
func scopeConfigSpread(shards int, spread bool) core.Config {
	size := 0
	if !spread {
		shards, size = 0, shards
		if size > 200 {
			size = 200
		}
	}
	return core.Config{Classes: map[string]core.ScopeClass{
		"room":  {Layout: core.LayoutExact, Window: time.Minute, SweepInterval: 10 * time.Second},
		"video": {Layout: core.LayoutCompact, Window: time.Minute, SweepInterval: 10 * time.Second, Shards: shards, ShardSize: size, Spread: spread},
		"live":  {Layout: core.LayoutApprox, Window: time.Minute, SweepInterval: 10 * time.Second, Bucket: 10 * time.Second},
	}}
}

var (
	room  = core.Scope{Class: "room", ID: "888"}
	video = core.Scope{Class: "video", ID: "10086"}
	live  = core.Scope{Class: "live", ID: "stage"}
)

// TestScopeCounters covers docs/design.md §9 for each layout.
func TestScopeCounters(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"exact: live count at any instant, members by recency", []step{
			{0, touch(room, "a", "b"), "ok"},
			{10 * sec, touch(room, "c"), "ok"},
			{20 * sec, touch(room, "a"), "ok"},
			{20 * sec, count(room), "3"},
			{20 * sec, members(room, 2), "a c | b"},
			{20 * sec, activeWithin(room, 15*sec), "2"},
			{60 * sec, count(room), "3"},
			{60*sec + 1*ms, count(room), "2"},
			{70 * sec, count(room), "2"},
			{70*sec + 1*ms, count(room), "1"},
			{70*sec + 1*ms, members(room, 10), "a"},
			{70*sec + 1*ms, leave(room, "a"), "true"},
			{70*sec + 1*ms, leave(room, "a"), "false"},
			{70*sec + 1*ms, count(room), "0"},
		}},
		{"compact: the count is the last sweep's", []step{
			{0, touch(video, "a", "b", "c", "d", "e"), "ok"},
			{1 * sec, count(video), "5"},
			{2 * sec, touch(video, "f"), "ok"},
			// no sweep yet, so no count key: each count sums the shards
			// (reads never write, docs/design.md §9)
			{2 * sec, count(video), "6"},
			{2 * sec, members(video, 4), "b c d e | a f"},
			{2 * sec, activeWithin(video, 1*sec), "1"},
			{10 * sec, sweepScopes, "removed=0 released=0"},
			{10 * sec, count(video), "6"},
			{30 * sec, touch(video, "a"), "ok"},
			{63 * sec, members(video, 10), "a"},
			{63 * sec, count(video), "6"},
			{63 * sec, sweepScopes, "removed=5 released=0"},
			{63 * sec, count(video), "1"},
			{63 * sec, leave(video, "a"), "true"},
			{63 * sec, count(video), "1"},
			{73 * sec, sweepScopes, "removed=0 released=0"},
			{73 * sec, count(video), "0"},
		}},
		{"compact: a sweep keeps a member to the last instant of its window", []step{
			{0, touch(video, "a"), "ok"},
			{1 * sec, touch(video, "b"), "ok"},
			// a's window passed 1 s ago; b's ends now, to the millisecond
			{61 * sec, sweepScopes, "removed=1 released=0"},
			{61 * sec, count(video), "1"},
		}},
		{"approx: unique members over the window's buckets", []step{
			{0, touch(live, "a", "b", "c"), "ok"},
			{5 * sec, touch(live, "a", "d"), "ok"},
			{15 * sec, touch(live, "a"), "ok"},
			{15 * sec, countNear(live, 4, 1), "≈4"},
			{15 * sec, activeWithin(live, 5*sec), "1"},
			{15 * sec, members(live, 10), "unsupported"},
			{15 * sec, leave(live, "a"), "unsupported"},
			{75 * sec, countNear(live, 1, 1), "≈1"},
		}},
		{"an empty scope is released after three empty sweeps", []step{
			{0, touch(room, "a"), "ok"},
			{10 * sec, sweepScopes, "removed=0 released=0"},
			{65 * sec, sweepScopes, "removed=1 released=0"},
			{80 * sec, sweepScopes, "removed=0 released=0"},
			{90 * sec, sweepScopes, "removed=0 released=1"},
			{100 * sec, sweepScopes, "removed=0 released=0"},
			{100 * sec, count(room), "0"},
			{100 * sec, touch(room, "b"), "ok"},
			{100 * sec, count(room), "1"},
		}},
		{"a touch resets the release countdown", []step{
			{0, touch(video, "a"), "ok"},
			{65 * sec, sweepScopes, "removed=1 released=0"},
			{80 * sec, sweepScopes, "removed=0 released=0"},
			{85 * sec, touch(video, "b"), "ok"},
			{90 * sec, sweepScopes, "removed=0 released=0"},
			{90 * sec, count(video), "1"},
		}},
		{"unknown classes and bad members are refused", []step{
			{0, touch(core.Scope{Class: "nope", ID: "1"}, "a"), "invalid touches[0].Scope.Class"},
			{0, touch(room, ""), "invalid touches[0].Member"},
			{0, count(core.Scope{Class: "room", ID: ""}), "invalid scope.ID"},
			{0, activeWithin(room, 2*time.Minute), "invalid d"},
		}},
	}
	for _, spread := range []bool{false, true} {
		for _, tt := range tests {
			steps := append([]step(nil), tt.steps...)
			for i := range steps {
				if spread && steps[i].want == "b c d e | a f" {
					// pages run shard by shard: a spread scope's 3 fixed
					// shards, not the self-sized scope's
					steps[i].want = "c e f a | b d"
				}
			}
			t.Run(fmt.Sprintf("%s/spread=%v", tt.name, spread), func(t *testing.T) { runTable(t, scopeConfigSpread(3, spread), steps) })
		}
	}
}

// TestCountsDoNotDependOnShards touches the same members into compact scopes
// with 1, 16 and 32 shards and expects the same counts before and after a
// sweep.
func TestCountsDoNotDependOnShards(t *testing.T) {
	ctx := context.Background()
	for _, shards := range []int{1, 16, 32} {
		for _, spread := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/spread=%v", shards, spread), func(t *testing.T) {
				e, clk, mr := newMiniEngine(t, scopeConfigSpread(shards, spread))
				var batch []core.ScopeTouch
				for i := 0; i < 700; i++ {
					batch = append(batch, core.ScopeTouch{Scope: video, Member: fmt.Sprint("m", i)})
				}
				if err := e.TouchBatch(ctx, batch); err != nil {
					t.Fatal(err)
				}
				clk.t = clk.t.Add(30 * time.Second)
				mr.SetTime(clk.t)
				if err := e.TouchBatch(ctx, batch[:200]); err != nil {
					t.Fatal(err)
				}
				want := []int64{700, 200}
				for i, at := range []time.Duration{0, 31 * time.Second} {
					clk.t = clk.t.Add(at)
					mr.SetTime(clk.t)
					if _, err := e.SweepScopes(ctx); err != nil {
						t.Fatal(err)
					}
					c, err := e.Count(ctx, video)
					if err != nil {
						t.Fatal(err)
					}
					if c.N != want[i] {
						t.Fatalf("with %d shards, count %d = %d, want %d", shards, i, c.N, want[i])
					}
				}
			})
		}
	}
}

// countNear renders "≈want" when an approx count is within tol of want (the
// HyperLogLog of miniredis estimates small sets less closely than Redis).
func countNear(sc core.Scope, want, tol int64) func(*env) string {
	return func(e *env) string {
		c, err := opdo.Do[core.Count](e.ctx, e.p, core.ReadCount{Scope: sc})
		if err != nil {
			return errName(err)
		}
		if c.N < want-tol || c.N > want+tol {
			return fmt.Sprint(c.N)
		}
		return fmt.Sprint("≈", want)
	}
}
