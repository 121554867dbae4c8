package core_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/internal/opdo"
)

// cannedStore answers every heartbeat call with accepted beats and no
// change, without allocating, so that benchmarks measure the core alone: a
// steady beat call (lua/heartbeat_steady.lua) applies every beat it is offered.
type cannedStore struct {
	steadySHA     string
	steady, other []core.Result
	tokens        []core.Value // the steady reply for n beats
}

func newCannedStore(beats int) *cannedStore {
	items := make([]core.Value, 0, 4*beats)
	for i := 0; i < beats; i++ {
		items = append(items, core.Value{Kind: core.ValueString, Str: ""}, core.Value{Kind: core.ValueString, Str: "tok"}, core.Value{Kind: core.ValueInt, Int: -1}, core.Value{Kind: core.ValueInt, Int: -1})
	}
	reply := core.Value{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueInt, Int: 1_700_000_000_000}, {Kind: core.ValueArray, Array: items}}}
	s := &cannedStore{other: make([]core.Result, 64)}
	for i := range s.other {
		s.other[i] = core.Result{Value: reply}
	}
	// the steady beat's reply holds a token for each beat of its call, and
	// the engine splits a batch into calls of a few dozen beats
	s.tokens = make([]core.Value, beats+1)
	for n := range s.tokens {
		s.tokens[n] = core.Value{Kind: core.ValueString, Str: strings.TrimSuffix(strings.Repeat("tok\x1f", n), "\x1f")}
	}
	s.steady = make([]core.Result, 64)
	for _, sc := range luascripts.All() {
		if sc.Name == "beat" {
			s.steadySHA = sc.SHA
		}
	}
	return s
}

func (s *cannedStore) Eval(_ context.Context, calls []core.Call) []core.Result {
	if len(calls) > 0 && calls[0].SHA == s.steadySHA {
		for i, c := range calls {
			s.steady[i] = core.Result{Value: s.tokens[(len(c.Args)-steadyHead)/steadyFields]}
		}
		return s.steady[:len(calls)]
	}
	return s.other[:len(calls)]
}

// The steady beat's arguments: now, the page prefix, 3 settings and ARG_LEFT, then
// 6 for each beat (core/lua/heartbeat_steady.lua, BEAT_FIELDS).
const steadyHead, steadyFields = 6, 6

// BenchmarkHeartbeat measures the core's work for one steady heartbeat:
// checks, arguments, the call, and decoding the reply (the store answers at
// once).
func BenchmarkHeartbeat(b *testing.B) {
	e, err := core.New(newCannedStore(1), core.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	hb := core.Heartbeat{User: "user-1234", Device: "phone", Kind: core.KindIOS, Token: "f00dfeedf00dfeed", Active: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Heartbeat(ctx, hb); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeartbeatBatch measures the core's work per beat of a batch of
// 100 steady beats in one bucket.
func BenchmarkHeartbeatBatch(b *testing.B) {
	e, err := core.New(newCannedStore(100), core.Config{UserBuckets: 1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	beats := make([]core.Heartbeat, 100)
	for i := range beats {
		beats[i] = core.Heartbeat{User: fmt.Sprint("user-", i), Device: "phone", Kind: core.KindIOS, Token: "f00dfeedf00dfeed"}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.HeartbeatBatch(ctx, beats); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(beats)), "ns/beat")
}

// BenchmarkAggregate measures the aggregation rule of docs/design.md §6.
func BenchmarkAggregate(b *testing.B) {
	states := []core.Status{core.StatusAway, core.StatusPushOnline, core.StatusOnline}
	b.ReportAllocs()
	for b.Loop() {
		if core.Aggregate(states, core.ManualNone) != core.StatusOnline {
			b.Fatal("wrong aggregate")
		}
	}
}

// BenchmarkModelHeartbeat measures the reference model, for comparison.
func BenchmarkModelHeartbeat(b *testing.B) {
	clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
	m, _ := core.NewModel(core.Config{Clock: clk.Now})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		clk.t = clk.t.Add(time.Millisecond)
		if _, err := opdo.Do[core.Ack](ctx, m, core.Heartbeat{User: "u", Device: "d", Active: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewPlanner measures configuring an engine's plans with the
// default settings: what a WebAssembly module's configure does natively.
func BenchmarkNewPlanner(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := core.NewPlanner(core.Config{}); err != nil {
			b.Fatal(err)
		}
	}
}

// slowStore is a cannedStore behind a round trip of delay, as Redis on a
// network is, so that concurrent callers queue in group commit.
type slowStore struct {
	delay time.Duration
	mu    sync.Mutex
	inner *cannedStore
	evals int
}

func (s *slowStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evals++
	return append([]core.Result(nil), s.inner.Eval(ctx, calls)...) // the one allocation of a round trip here
}

// BenchmarkHeartbeatGroupCommit measures the core's work per steady beat
// of 16 callers at once, whose beats group commit combines over a store
// with 100 µs round trips: allocs/op are the core's per beat, plus one per
// round trip of the store's own.
func BenchmarkHeartbeatGroupCommit(b *testing.B) {
	s := &slowStore{delay: 100 * time.Microsecond, inner: newCannedStore(core.MaxBatch)}
	e, err := core.New(s, core.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		hb := core.Heartbeat{User: fmt.Sprint("user-", next.Add(1)), Device: "phone", Kind: core.KindIOS, Token: "f00dfeedf00dfeed"}
		for pb.Next() {
			if _, err := e.Heartbeat(ctx, hb); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/float64(s.evals), "beats/trip")
}
