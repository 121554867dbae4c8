package host_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/host"
)

// replayStore answers each call from a cache of the replies that an inner
// store gave to the first call of the same shape (script and number of
// arguments): after warming up, a benchmark on it measures the engine
// and, for the module, the cost of crossing into WebAssembly and back,
// without Redis.
type replayStore struct {
	inner core.Store
	mu    sync.Mutex
	cache map[string]core.Result
}

func (s *replayStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]core.Result, len(calls))
	for i, c := range calls {
		key := c.SHA + c.Source + "/" + strconv.Itoa(len(c.Args))
		r, ok := s.cache[key]
		if !ok {
			r = s.inner.Eval(ctx, []core.Call{c})[0]
			if r.Err == nil {
				s.cache[key] = r
			}
		}
		out[i] = r
	}
	return out
}

func benchBeats(n int) []core.Heartbeat {
	beats := make([]core.Heartbeat, n)
	for i := range beats {
		beats[i] = core.Heartbeat{User: "user-" + strconv.Itoa(i), Device: "web", Kind: core.KindWeb, Token: "0123456789abcdef"}
	}
	return beats
}

func benchHeartbeat(b *testing.B, open func(tb testing.TB, store core.Store, clk *clock) core.Presence) {
	for _, storeName := range []string{"replay", "miniredis"} {
		for _, n := range []int{1, 100} {
			b.Run("store="+storeName+"/batch="+strconv.Itoa(n), func(b *testing.B) {
				clk := &clock{t: t0}
				store, _ := miniStore(b, t0)
				if storeName == "replay" {
					store = &replayStore{inner: store, cache: map[string]core.Result{}}
				}
				p := open(b, store, clk)
				ctx := context.Background()
				beats := benchBeats(n)
				for i := 0; i < 2; i++ { // sessions, loaded scripts, a warm cache
					if _, err := p.HeartbeatBatch(ctx, beats); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := p.HeartbeatBatch(ctx, beats); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/beat")
			})
		}
	}
}

// BenchmarkHeartbeatNative is the native core.Engine, the baseline of
// BenchmarkHeartbeatWASM.
func BenchmarkHeartbeatNative(b *testing.B) {
	benchHeartbeat(b, func(tb testing.TB, store core.Store, clk *clock) core.Presence {
		e, err := core.New(store, core.Config{Clock: clk, UserBuckets: 1})
		if err != nil {
			tb.Fatal(err)
		}
		return e
	})
}

// BenchmarkHeartbeatWASM is the same engine in the module, through the
// ABI: the difference on the replay store is the per-call overhead.
func BenchmarkHeartbeatWASM(b *testing.B) {
	benchHeartbeat(b, func(tb testing.TB, store core.Store, clk *clock) core.Presence {
		e, err := instanceT(tb, store).Configure(context.Background(), core.Config{Clock: clk, UserBuckets: 1}, host.EngineOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		return e
	})
}
