package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/slot"
)

// vclock is a virtual clock in whole milliseconds, shared by a model and
// the engines compared with it.
type vclock struct{ ms atomic.Int64 }

func newVClock() *vclock { return vclockAt(time.Now().UnixMilli()) }

func vclockAt(ms int64) *vclock {
	c := &vclock{}
	c.ms.Store(ms)
	return c
}

// Now returns the clock's instant.
func (c *vclock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

func (c *vclock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// Sizes of the spread comparison: scopes with many shards, so that a
// spread scope's shards land on every master, and more members than one
// page holds.
const (
	spreadShards  = 16
	spreadMembers = 300
	spreadWindow  = 30 * time.Second
	spreadBuckets = 4
)

// Key lifetimes longer than any sequence: the server keeps wall-clock time
// while the engines run in virtual time, so nothing may expire on its own.
const longGrace = time.Hour + time.Millisecond

// spreadConfig is the configuration of the spread comparison: one compact
// class whose shards share a slot per scope (spread false) or each have one
// (spread true); small sweep steps.
func spreadConfig(prefix string, spread bool, clk func() time.Time) core.Config {
	return core.Config{
		Prefix:       prefix,
		ScopeBuckets: spreadBuckets,
		Classes: map[string]core.ScopeClass{
			"video": {Layout: core.LayoutCompact, Window: spreadWindow, SweepInterval: 5 * time.Second,
				Shards: spreadShards, Spread: spread},
		},
		SweepBudget:    64,
		ReleaseAfter:   2,
		KeyGrace:       longGrace,
		CountTTL:       longGrace,
		LastGoodCounts: -1,
		Clock:          clk,
	}
}

var spreadScopes = []core.Scope{{Class: "video", ID: "hot"}, {Class: "video", ID: "v:2 {x}"}}

// spreadStep runs one random step on p and returns what it observed; the
// same rng state gives the same step on every Presence.
type spreadStep func(ctx context.Context, p core.Presence) string

// randomSpreadStep draws a step; advance moves the shared clock and is run
// once per step, not once per Presence.
func randomSpreadStep(r *rand.Rand) (name string, advance time.Duration, step spreadStep) {
	sc := spreadScopes[r.IntN(len(spreadScopes))]
	member := func() string { return "m" + strconv.Itoa(r.IntN(spreadMembers)) }
	switch n := r.IntN(100); {
	case n < 35:
		ts := make([]core.ScopeTouch, 1+r.IntN(200))
		for i := range ts {
			ts[i] = core.ScopeTouch{Scope: spreadScopes[r.IntN(len(spreadScopes))], Member: member()}
		}
		return fmt.Sprintf("touch %d", len(ts)), 0, func(ctx context.Context, p core.Presence) string {
			return errText(opdo.Err(ctx, p, core.TouchBatch(ts)))
		}
	case n < 40:
		m := member()
		return "leave " + sc.String() + " " + m, 0, func(ctx context.Context, p core.Presence) string {
			ok, err := opdo.Do[bool](ctx, p, core.Leave{Scope: sc, Member: m})
			return fmt.Sprint(ok, errText(err))
		}
	case n < 55:
		return "advance", time.Duration(100+r.IntN(12000)) * time.Millisecond, func(context.Context, core.Presence) string { return "" }
	case n < 70:
		return "sweep scopes", 0, func(ctx context.Context, p core.Presence) string {
			rep, err := opdo.Do[core.SweepReport](ctx, p, core.SweepScopes{})
			return fmt.Sprintf("removed=%d released=%d %s", rep.Removed, rep.Released, errText(err))
		}
	case n < 80:
		return "count " + sc.String(), 0, func(ctx context.Context, p core.Presence) string {
			c, err := opdo.Do[core.Count](ctx, p, core.ReadCount{Scope: sc})
			return fmt.Sprintf("n=%d asOf=%d stale=%t %s", c.N, c.AsOf.UnixMilli(), c.Stale, errText(err))
		}
	case n < 90:
		limit := []int{1, 7, 100, core.MaxPage}[r.IntN(4)]
		return fmt.Sprintf("members %s by %d", sc, limit), 0, func(ctx context.Context, p core.Presence) string {
			return memberPages(ctx, p, sc, limit)
		}
	default:
		d := time.Duration(1+r.IntN(int(spreadWindow.Milliseconds()))) * time.Millisecond
		return "active within " + d.String() + " " + sc.String(), 0, func(ctx context.Context, p core.Presence) string {
			n, err := opdo.Do[int64](ctx, p, core.ReadActive{Scope: sc, Within: d})
			return fmt.Sprintf("n=%d %s", n, errText(err))
		}
	}
}

// memberPages lists every page of sc and renders the page sizes, then the
// members sorted: pages run shard by shard, and a self-sized scope's shards
// are not a spread scope's, so the two modes list in different orders.
func memberPages(ctx context.Context, p core.Presence, sc core.Scope, limit int) string {
	var b strings.Builder
	var all []string
	cursor := ""
	render := func() string {
		sort.Strings(all)
		return b.String() + strings.Join(all, " ")
	}
	for range 2 * spreadMembers {
		page, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: sc, Cursor: cursor, Limit: limit})
		if err != nil {
			return render() + errText(err)
		}
		for _, m := range page.Members {
			all = append(all, fmt.Sprintf("%s@%d", m.ID, m.LastSeen.UnixMilli()))
		}
		fmt.Fprintf(&b, "%d | ", len(page.Members))
		if cursor = page.Next; cursor == "" {
			return render()
		}
	}
	return render() + "… (cursor never ends)"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return "err: " + err.Error()
}

// TestSpreadMatchesModel runs the same random scope steps on core.Model and
// on engines over every adapter on a 3-master cluster, with the compact
// class's shards kept together and spread over slots: every count, member
// page, ActiveWithin and sweep report must match the model, and so the two
// modes match each other.
func TestSpreadMatchesModel(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, 0)
	resetStats(t, c)
	var guard slotGuard
	seqs, steps := scaled(6), 60
	for _, tg := range ClusterTargets(c.Addrs()) {
		t.Run(tg.Adapter, func(t *testing.T) {
			t.Parallel()
			be, err := tg.Open(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Close() })
			store := guard.wrap(be.Store)
			for seq := range seqs {
				seed := uint64(seq + 1)
				var transcripts [2]string
				t0 := time.Now().UnixMilli()
				for mode, spread := range []bool{false, true} {
					prefix := fmt.Sprintf("spread-%s-%d-%t", tg.Adapter, seq, spread)
					transcripts[mode] = runSpreadSequence(t, store, prefix, spread, seed, t0, steps)
				}
				if line, a, b := firstDiff(transcripts[0], transcripts[1]); line > 0 {
					t.Errorf("seed %d: together and spread part at step %d:\ntogether: %s\nspread:   %s", seed, line, a, b)
				}
			}
		})
	}
	t.Cleanup(func() {
		guard.check(t)
		scanned(t, c)
	})
}

// runSpreadSequence runs steps random steps from seed on a model and on an
// engine over store, fails t where they disagree, and returns the
// transcript.
func runSpreadSequence(t testing.TB, store core.Store, prefix string, spread bool, seed uint64, t0 int64, steps int) string {
	t.Helper()
	ctx := context.Background()
	clk := vclockAt(t0)
	cfg := spreadConfig(prefix, spread, clk.Now)
	model, err := core.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := core.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 0x5bead))
	var transcript strings.Builder
	var done []string
	run := func(name string, step spreadStep) bool {
		want, got := step(ctx, model), step(ctx, eng)
		done = append(done, name)
		fmt.Fprintf(&transcript, "%s → %s\n", name, want)
		if want != got {
			t.Errorf("%s (spread=%t, seed %d) step %d %q:\nmodel:  %s\nengine: %s\nsteps: %s", prefix, spread, seed, len(done), name, clip(want), clip(got), strings.Join(done, "; "))
			return false
		}
		return true
	}
	for range steps {
		name, adv, step := randomSpreadStep(r)
		clk.advance(adv)
		if !run(name, step) {
			return transcript.String()
		}
	}
	// Everything expires; the scopes empty and are released.
	clk.advance(spreadWindow + time.Second)
	for range 3 {
		if !run("sweep scopes", func(ctx context.Context, p core.Presence) string {
			rep, err := opdo.Do[core.SweepReport](ctx, p, core.SweepScopes{})
			return fmt.Sprintf("removed=%d released=%d %s", rep.Removed, rep.Released, errText(err))
		}) {
			break
		}
	}
	return transcript.String()
}

// batchLog records the keys of every call of every Eval batch.
type batchLog struct {
	mu      sync.Mutex
	batches [][][]string
}

func (l *batchLog) wrap(s core.Store) core.Store {
	return interceptEval(s, func(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result {
		keys := make([][]string, len(calls))
		for i, c := range calls {
			keys[i] = c.Keys
		}
		l.mu.Lock()
		l.batches = append(l.batches, keys)
		l.mu.Unlock()
		return next(ctx, calls)
	})
}

// take returns the batches recorded since the last take.
func (l *batchLog) take() [][][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.batches
	l.batches = nil
	return b
}

// shardBatch returns the recorded batch that addressed the most distinct
// slots, and how many it addressed.
func shardBatch(batches [][][]string) ([][]string, int) {
	var best [][]string
	most := 0
	for _, b := range batches {
		slots := map[uint16]bool{}
		for _, keys := range b {
			if len(keys) > 0 {
				slots[slot.Of(keys[0])] = true
			}
		}
		if len(slots) > most {
			best, most = b, len(slots)
		}
	}
	return best, most
}

// mastersOf returns the addresses of the masters that serve the first key
// of each call.
func mastersOf(t testing.TB, c *redistest.ClusterInstance, batch [][]string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, keys := range batch {
		m, err := c.MasterFor(keys[0])
		if err != nil {
			t.Fatal(err)
		}
		out[m.Addr] = true
	}
	return out
}

// TestSpreadRoundPerNode checks the shape of a spread scope's traffic on a
// 3-master cluster, through every adapter: a count without a count key, and
// a sweep, each read all shards in one Store.Eval batch whose calls reach
// every master; a kept-together scope's count stays in one slot, and its
// sweep in the one call of its bucket.
// For go-redis it also counts the pipelines each node receives: one per
// node for the shard batch.
func TestSpreadRoundPerNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, 0)
	for _, tg := range ClusterTargets(c.Addrs()) {
		t.Run(tg.Adapter, func(t *testing.T) {
			be, err := tg.Open(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Close() })
			ctx := context.Background()
			for _, spread := range []bool{false, true} {
				var log batchLog
				clk := newVClock()
				eng, err := core.New(log.wrap(be.Store), spreadConfig("round-"+tg.Adapter+"-"+strconv.FormatBool(spread), spread, clk.Now))
				if err != nil {
					t.Fatal(err)
				}
				sc := spreadScopes[0]
				ts := make([]core.ScopeTouch, 400)
				for i := range ts {
					ts[i] = core.ScopeTouch{Scope: sc, Member: "m" + strconv.Itoa(i)}
				}
				if err := eng.TouchBatch(ctx, ts); err != nil {
					t.Fatal(err)
				}
				log.take()
				cnt, err := eng.Count(ctx, sc)
				if err != nil || cnt.N != 400 {
					t.Fatalf("spread=%t: count %v %v, want 400", spread, cnt, err)
				}
				countBatch, countSlots := shardBatch(log.take())
				clk.advance(6 * time.Second)
				if _, err := eng.SweepScopes(ctx); err != nil {
					t.Fatal(err)
				}
				sweepBatch, sweepSlots := shardBatch(log.take())
				if !spread {
					// The sweep visits every scope bucket, one slot each.
					if countSlots != 1 || sweepSlots != spreadBuckets || len(sweepBatch) != spreadBuckets {
						t.Errorf("together: count addressed %d slots, sweep %d in %d calls; want 1 and 4 (one per scope bucket)", countSlots, sweepSlots, len(sweepBatch))
					}
					continue
				}
				for what, b := range map[string][][]string{"count": countBatch, "sweep": sweepBatch} {
					slots := map[uint16]bool{}
					for _, keys := range b {
						slots[slot.Of(keys[0])] = true
					}
					if len(b) != spreadShards || len(slots) != spreadShards {
						t.Errorf("spread %s: the widest batch had %d calls on %d slots, want one batch of %d shards", what, len(b), len(slots), spreadShards)
					}
					if m := mastersOf(t, c, b); len(m) != len(c.Masters()) {
						t.Errorf("spread %s: shards on %d masters (%v), want all %d", what, len(m), m, len(c.Masters()))
					}
				}
			}
		})
	}
	t.Run("goredis pipelines per node", func(t *testing.T) { goredisRounds(t, c) })
}

// firstDiff returns the first line (from 1) where a and b differ, and the
// two lines; 0 when they are equal.
func firstDiff(a, b string) (int, string, string) {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return i + 1, clip(x), clip(y)
		}
	}
	return 0, "", ""
}

// clip shortens s for a failure message.
func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}
