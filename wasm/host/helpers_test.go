package host_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/host"
)

// The module is built and compiled once per test binary.
var (
	buildOnce sync.Once
	shared    *host.Runtime
	buildErr  error
)

// runtimeT returns the shared runtime of a fresh build of wasm/module.
func runtimeT(tb testing.TB) *host.Runtime {
	tb.Helper()
	buildOnce.Do(func() {
		ctx := context.Background()
		var b []byte
		if b, buildErr = wasm.BuildBytes(ctx, wasm.WASI); buildErr != nil {
			return
		}
		shared, buildErr = host.NewRuntime(ctx, b, host.Options{})
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return shared
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// miniStore starts a miniredis on virtual time and returns a store on it.
func miniStore(tb testing.TB, start time.Time) (core.Store, *miniredis.Miniredis) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	mr.SetTime(start)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	tb.Cleanup(func() { c.Close() })
	return goredis.New(c), mr
}

// instanceT returns a new instance over store, closed at cleanup.
func instanceT(tb testing.TB, store core.Store) *host.Instance {
	tb.Helper()
	in, err := runtimeT(tb).NewInstance(context.Background(), store)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { in.Close(context.Background()) })
	return in
}
