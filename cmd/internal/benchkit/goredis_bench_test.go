package benchkit_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// BenchmarkSteadyBeatGoRedis measures what a steady beat costs its caller
// through go-redis against a real redis-server (started on a free loopback
// port; skipped where none is installed): logged-in users who stay online,
// one call a beat, from 1, 16 and 128 goroutines, as cmd/bench/compare's
// single-beat rows. Allocations (-benchmem) and "client-µs/beat", this
// process's CPU time per beat, are the client's alone; the server runs in
// its own process. "trips/beat" is round trips (Store.Eval calls) per
// beat and "calls/beat" script calls: group commit's share. Profile it
// with -cpuprofile or -memprofile.
func BenchmarkSteadyBeatGoRedis(b *testing.B) {
	srv := redistest.Server(b)
	const users = 2000
	workers := []int{1, 16, 128}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: workers[len(workers)-1] + 2, MinIdleConns: workers[len(workers)-1]})
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	store := &counting{Store: goredis.New(c)}
	e, err := benchkit.NewEngine(ctx, store, core.Config{Prefix: "bench"}, benchkit.ClockServer)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, users)
	for i := range ids {
		ids[i] = benchkit.UserID(i)
	}
	tokens, err := benchkit.Login(ctx, e, users, func(i int) string { return ids[i] })
	if err != nil {
		b.Fatal(err)
	}
	if err := benchkit.Warm(ctx, e, ids, tokens, func(int) string { return "d0" }); err != nil {
		b.Fatal(err)
	}
	beat := func(seq int) error {
		u := seq * 7919 % users
		_, err := e.Heartbeat(ctx, core.Heartbeat{User: ids[u], Device: "d0", Kind: core.KindWeb, Token: tokens[u], Active: true})
		return err
	}
	for _, n := range workers {
		b.Run("workers="+strconv.Itoa(n), func(b *testing.B) {
			var seq atomic.Int64
			var failed atomic.Value
			trips0, calls0 := store.trips.Load(), store.calls.Load()
			cpu0, ok := benchkit.ProcessCPU()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					for {
						i := int(seq.Add(1)) - 1
						if i >= b.N {
							return
						}
						if err := beat(i); err != nil {
							failed.CompareAndSwap(nil, err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			if cpu1, _ := benchkit.ProcessCPU(); ok {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "client-µs/beat")
			}
			b.ReportMetric(float64(store.trips.Load()-trips0)/float64(b.N), "trips/beat")
			b.ReportMetric(float64(store.calls.Load()-calls0)/float64(b.N), "calls/beat")
		})
	}
}

// counting counts a go-redis store's round trips and script calls, and
// publishes through it as the engine would without the count.
type counting struct {
	*goredis.Store
	trips, calls atomic.Int64
}

func (s *counting) Eval(ctx context.Context, calls []core.Call) []core.Result {
	s.trips.Add(1)
	s.calls.Add(int64(len(calls)))
	return s.Store.Eval(ctx, calls)
}
