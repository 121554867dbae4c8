package host_test

import (
	"context"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
	"github.com/presencekit/presence/wasm/abi"
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

// cpuTime returns the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runner is what a benchmark drives: an engine, and how it runs beats
// as separate operations in flight together (core.Engine.Run natively,
// host.Engine.Run in the module).
type runner struct {
	p        core.Presence
	together func(ctx context.Context, beats []core.Heartbeat) error
}

// benchHeartbeat measures heartbeats: one Heartbeat call ("single"), one
// HeartbeatBatch of n ("batch"), and n Heartbeat operations as plans in
// flight together ("plans"), each per beat, in wall time (ns/beat) and
// in the process's CPU time (cpu-ns/beat).
func benchHeartbeat(b *testing.B, open func(tb testing.TB, store core.Store, clk *clock) runner) {
	for _, storeName := range []string{"replay", "miniredis"} {
		for _, mode := range []string{"single", "batch", "plans"} {
			n := 100
			if mode == "single" {
				n = 1
			}
			b.Run("store="+storeName+"/"+mode+"="+strconv.Itoa(n), func(b *testing.B) {
				clk := &clock{t: t0}
				store, _ := miniStore(b, t0)
				if storeName == "replay" {
					store = &replayStore{inner: store, cache: map[string]core.Result{}}
				}
				r := open(b, store, clk)
				ctx := context.Background()
				beats := benchBeats(n)
				run := func() error {
					switch mode {
					case "single":
						_, err := opdo.Do[core.Ack](ctx, r.p, beats[0])
						return err
					case "batch":
						_, err := opdo.Do[[]core.Ack](ctx, r.p, core.HeartbeatBatch(beats))
						return err
					}
					return r.together(ctx, beats)
				}
				for i := 0; i < 2; i++ { // sessions, loaded scripts, a warm cache
					if err := run(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu := cpuTime()
				for i := 0; i < b.N; i++ {
					if err := run(); err != nil {
						b.Fatal(err)
					}
				}
				cpu = cpuTime() - cpu
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/beat")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/beat")
			})
		}
	}
}

// BenchmarkHeartbeatNative is the native core.Engine, the baseline of
// BenchmarkHeartbeatWASM.
func BenchmarkHeartbeatNative(b *testing.B) {
	benchHeartbeat(b, func(tb testing.TB, store core.Store, clk *clock) runner {
		e, err := core.New(store, core.Config{Clock: clk.Now, UserBuckets: 1})
		if err != nil {
			tb.Fatal(err)
		}
		pl := e.Planner()
		return runner{p: e, together: func(ctx context.Context, beats []core.Heartbeat) error {
			now := clk.Now()
			plans := make([]core.Stepper, len(beats))
			for i, hb := range beats {
				plans[i] = pl.Plan(hb, now)
			}
			e.Run(ctx, plans...)
			for _, p := range plans {
				if _, err := p.Result(); err != nil {
					return err
				}
			}
			return nil
		}}
	})
}

// BenchmarkConfigureWASM measures configuring an engine, with the default
// settings, in an instance of the module that has been configured before.
func BenchmarkConfigureWASM(b *testing.B) {
	in := instanceT(b, &replayStore{cache: map[string]core.Result{}})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.Configure(ctx, core.Config{}, host.EngineOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeartbeatWASM is the same engine in the module, through ABI
// v2 with the hot path in the compact form: the difference on the replay
// store is the per-call overhead.
func BenchmarkHeartbeatWASM(b *testing.B) {
	benchHeartbeat(b, func(tb testing.TB, store core.Store, clk *clock) runner {
		return wasmRunner(tb, instanceT(tb, store), clk)
	})
}

// BenchmarkHeartbeatWASMJSON is BenchmarkHeartbeatWASM with every message
// in JSON (host.Options.JSON).
func BenchmarkHeartbeatWASMJSON(b *testing.B) {
	benchHeartbeat(b, func(tb testing.TB, store core.Store, clk *clock) runner {
		return wasmRunner(tb, instanceOf(tb, runtimeJSONT(tb), store), clk)
	})
}

// wasmRunner configures an engine in the instance in and drives it.
func wasmRunner(tb testing.TB, in *host.Instance, clk *clock) runner {
	e, err := in.Configure(context.Background(), core.Config{Clock: clk.Now, UserBuckets: 1}, host.EngineOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return runner{p: e, together: func(ctx context.Context, beats []core.Heartbeat) error {
		ops := make([]*host.Op, len(beats))
		for i, hb := range beats {
			w := abi.FromHeartbeat(hb)
			ops[i] = &host.Op{Op: abi.OpHeartbeat, Args: &w}
		}
		if err := e.Run(ctx, ops...); err != nil {
			return err
		}
		for _, o := range ops {
			if o.Err != nil {
				return o.Err
			}
		}
		return nil
	}}
}
