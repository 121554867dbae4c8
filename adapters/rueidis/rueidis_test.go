package rueidis_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	rueidisadapter "github.com/presencekit/presence/adapters/rueidis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/storetest"
)

// newClient returns a rueidis client, closed at the end of the test.
func newClient(tb testing.TB, opt rueidis.ClientOption) rueidis.Client {
	tb.Helper()
	opt.Dialer.Timeout = 2 * time.Second
	c, err := rueidis.NewClient(opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

func TestMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClient(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, ForceSingleClient: true})
	s := rueidisadapter.New(c)
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) {
		// Over RESP3 rueidis sends commands on the connection that holds
		// the subscription, which Redis allows and miniredis refuses; over
		// RESP2 it subscribes on a connection of its own.
		c := newClient(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, ForceSingleClient: true, AlwaysRESP2: true})
		storetest.RunPubSub(t, rueidisadapter.New(c))
	})
	t.Run("CachedGetWithoutCache", func(t *testing.T) {
		m.Set("k", "v1")
		for n := range 5 {
			v, err := s.CachedGet(context.Background(), "k")
			if err != nil || v.Kind != core.ValueString || v.Str != "v1" {
				t.Fatalf("read %d: %v %v", n, v, err)
			}
		}
		if s.Caching() {
			t.Fatal("a DisableCache client was not detected")
		}
		if hits, misses := s.CacheStats(); hits != 0 || misses != 5 {
			t.Fatalf("stats: %d hits, %d misses; want 0, 5", hits, misses)
		}
		m.Set("k", "v2")
		if v, err := s.CachedGet(context.Background(), "k"); err != nil || v.Str != "v2" {
			t.Fatalf("after SET: %v %v", v, err)
		}
		if v, err := s.CachedGet(context.Background(), "missing"); err != nil || v.Kind != core.ValueNil {
			t.Fatalf("missing key: %v %v", v, err)
		}
	})
	t.Run("Unavailable", func(t *testing.T) {
		m.Close()
		storetest.CheckUnavailable(t, s)
		// rueidis retries read-only commands until ctx ends.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := s.CachedGet(ctx, "k"); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("CachedGet on a dead server: %v", err)
		}
	})
}

func TestRealServer(t *testing.T) {
	srv := redistest.Server(t)
	c := newClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr}})
	var observed [2]atomic.Int64
	s := rueidisadapter.New(c, rueidisadapter.WithCacheTTL(time.Minute), rueidisadapter.WithCacheObserver(func(hit bool) {
		if hit {
			observed[1].Add(1)
		} else {
			observed[0].Add(1)
		}
	}))
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) { storetest.RunPubSub(t, s) })
	t.Run("DriverErrorStaysReachable", func(t *testing.T) {
		r := storetest.Eval(t, s, core.Call{SHA: "0000000000000000000000000000000000000000"})[0]
		var re *rueidis.RedisError
		if !errors.As(r.Err, &re) || !re.IsNoScript() {
			t.Fatalf("NOSCRIPT error %v does not unwrap to a *rueidis.RedisError", r.Err)
		}
	})
	t.Run("CachedGet", func(t *testing.T) {
		ctx := context.Background()
		other := newClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
		set := func(v string) {
			t.Helper()
			if err := other.Do(ctx, other.B().Set().Key("count").Value(v).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		set("1")
		get := func() core.Value {
			t.Helper()
			v, err := s.CachedGet(ctx, "count")
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if v := get(); v.Str != "1" {
			t.Fatalf("first read: %v", v)
		}
		if hits, misses := s.CacheStats(); hits != 0 || misses != 1 {
			t.Fatalf("after first read: %d hits, %d misses", hits, misses)
		}
		if v := get(); v.Str != "1" {
			t.Fatalf("second read: %v", v)
		}
		if hits, misses := s.CacheStats(); hits != 1 || misses != 1 {
			t.Fatalf("after second read: %d hits, %d misses; want 1, 1", hits, misses)
		}

		set("2")
		// The server's invalidation reaches the client asynchronously.
		deadline := time.Now().Add(storetest.Timeout)
		for get().Str != "2" {
			if time.Now().After(deadline) {
				t.Fatal("the cached value was never invalidated")
			}
			time.Sleep(5 * time.Millisecond)
		}
		hits, misses := s.CacheStats()
		if misses < 2 {
			t.Fatalf("the read after invalidation should miss: %d hits, %d misses", hits, misses)
		}
		if observed[0].Load() != int64(misses) || observed[1].Load() != int64(hits) {
			t.Fatalf("observer saw %d misses, %d hits; stats say %d, %d", observed[0].Load(), observed[1].Load(), misses, hits)
		}
		if !s.Caching() {
			t.Fatal("a caching client was taken for one that does not cache")
		}

		if v, err := s.CachedGet(ctx, "no-such-key"); err != nil || v.Kind != core.ValueNil {
			t.Fatalf("missing key: %v %v", v, err)
		}
		if v, err := s.CachedGet(ctx, "no-such-key"); err != nil || v.Kind != core.ValueNil {
			t.Fatalf("missing key, cached: %v %v", v, err)
		}
	})
	t.Run("FenceCache", func(t *testing.T) { checkFence(t, s, "fenced") })
	t.Run("Unavailable", func(t *testing.T) {
		srv.Kill()
		storetest.CheckUnavailable(t, s)
	})
}

func TestCluster(t *testing.T) {
	cl := redistest.Cluster(t, 3)
	c := newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs()})
	s := rueidisadapter.New(c)
	storetest.RunCluster(t, s, cl)
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) { storetest.RunPubSub(t, s) })
	t.Run("LossOfOneNode", func(t *testing.T) { storetest.RunLoss(t, s, false, storetest.FlushMasterOf(cl)) })
	t.Run("CachedGet", func(t *testing.T) {
		ctx := context.Background()
		key := "{cached}count"
		master, err := cl.MasterFor(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := master.Do("SET", key, "7"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if v, err := s.CachedGet(ctx, key); err != nil || v.Str != "7" {
				t.Fatalf("CachedGet: %v %v", v, err)
			}
		}
		if hits, _ := s.CacheStats(); hits != 1 {
			t.Fatalf("second read was not a hit: %d hits", hits)
		}
	})
	t.Run("FenceCache", func(t *testing.T) { checkFence(t, s, "{fenced}count") })
}

// setScript sets KEYS[1] to ARGV[1], as a sweep rewrites a count key.
const setScript = "return redis.call('SET', KEYS[1], ARGV[1])"

// checkFence rewrites key through s's own Eval, fences and reads it back
// through the cache, many times: every read must see the write just made.
// Without the fence the invalidation, which follows the write's reply, is
// often still on its way and the read returns the cached value before it.
func checkFence(t *testing.T, s *rueidisadapter.Store, key string) {
	ctx := context.Background()
	for i := range 200 {
		want := strconv.Itoa(i)
		if r := storetest.Eval(t, s, core.Call{Source: setScript, Keys: []string{key}, Args: []string{want}})[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
		if err := s.FenceCache(ctx, []string{key}); err != nil {
			t.Fatal(err)
		}
		for read := range 2 { // the second read is a hit
			if v, err := s.CachedGet(ctx, key); err != nil || v.Str != want {
				t.Fatalf("round %d, read %d after the fence: %v %v; want %s", i, read+1, v, err, want)
			}
		}
	}
	if hits, _ := s.CacheStats(); hits < 200 {
		t.Fatalf("only %d reads were served from the cache", hits)
	}
}

// TestLoss checks docs/design.md §11 on a real server that loses its data,
// by FLUSHALL and by a restart without persistence, with the client-side
// cache on.
func TestLoss(t *testing.T) {
	srv := redistest.Server(t)
	c := newClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr}})
	s := rueidisadapter.New(c, rueidisadapter.WithCacheTTL(time.Minute))
	storetest.RunLossOnServer(t, srv, s)
}
