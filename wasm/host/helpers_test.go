package host_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/tetratelabs/wazero"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/wasmtest"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/host"
)

// The module is built and compiled once per test binary, and run by two
// runtimes: the default one, and one that speaks only JSON.
var (
	buildOnce  sync.Once
	shared     *host.Runtime
	sharedJSON *host.Runtime
	buildErr   error
)

// runtimeT returns the shared runtime of a fresh build of wasm/module.
func runtimeT(tb testing.TB) *host.Runtime {
	tb.Helper()
	buildOnce.Do(func() {
		ctx := context.Background()
		var b []byte
		if b, buildErr = wasmtest.Bytes(wasm.WASI); buildErr != nil {
			return
		}
		var opt host.Options
		if cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(os.TempDir(), "presence-wazero-cache")); err == nil {
			opt.Cache = cache // the machine code, across test binaries
		}
		if shared, buildErr = host.NewRuntime(ctx, b, opt); buildErr != nil {
			return
		}
		opt.JSON = true
		sharedJSON, buildErr = host.NewRuntime(ctx, b, opt)
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return shared
}

// runtimeJSONT returns the shared runtime that speaks only JSON.
func runtimeJSONT(tb testing.TB) *host.Runtime {
	tb.Helper()
	runtimeT(tb)
	return sharedJSON
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
	s, mr, _ := miniClient(tb, start)
	return s, mr
}

// miniClient is miniStore that also returns the client.
func miniClient(tb testing.TB, start time.Time) (core.Store, *miniredis.Miniredis, *redis.Client) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	mr.SetTime(start)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	tb.Cleanup(func() { c.Close() })
	return goredis.New(c), mr, c
}

// recorder collects the messages published on a server's channels.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

// record subscribes to channels on c and records what arrives until cleanup.
func record(tb testing.TB, c *redis.Client, channels ...string) *recorder {
	tb.Helper()
	ctx := context.Background()
	ps := c.Subscribe(ctx, channels...)
	for range channels {
		if _, err := ps.Receive(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ps.Channel() {
			r.mu.Lock()
			r.msgs = append(r.msgs, m.Channel+" "+m.Payload)
			r.mu.Unlock()
		}
	}()
	tb.Cleanup(func() { ps.Close(); <-done })
	return r
}

// snapshot returns the messages so far.
func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// instanceT returns a new instance over store, closed at cleanup.
func instanceT(tb testing.TB, store core.Store) *host.Instance {
	tb.Helper()
	return instanceOf(tb, runtimeT(tb), store)
}

// instanceOf returns a new instance of rt over store, closed at cleanup.
func instanceOf(tb testing.TB, rt *host.Runtime, store core.Store) *host.Instance {
	tb.Helper()
	in, err := rt.NewInstance(context.Background(), store)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { in.Close(context.Background()) })
	return in
}
