package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/storetest"
)

// newStore returns a Store over a single-node client of addr, closed at the
// end of the test. Retries are off so that a dead server fails fast.
func newStore(tb testing.TB, addr string) (*goredis.Store, *redis.Client) {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second})
	tb.Cleanup(func() { c.Close() })
	return goredis.New(c), c
}

func TestMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	s, _ := newStore(t, m.Addr())
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) { storetest.RunPubSub(t, s) })
	t.Run("Unavailable", func(t *testing.T) {
		m.Close()
		storetest.CheckUnavailable(t, s)
	})
}

func TestRealServer(t *testing.T) {
	srv := redistest.Server(t)
	s, _ := newStore(t, srv.Addr)
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) { storetest.RunPubSub(t, s) })
	t.Run("DriverErrorStaysReachable", func(t *testing.T) {
		r := storetest.Eval(t, s, core.Call{SHA: "0000000000000000000000000000000000000000"})[0]
		var re redis.Error
		if !errors.As(r.Err, &re) {
			t.Fatalf("NOSCRIPT error %v does not unwrap to a redis.Error", r.Err)
		}
	})
	t.Run("Unavailable", func(t *testing.T) {
		srv.Kill()
		storetest.CheckUnavailable(t, s)
	})
	t.Run("Recovers", func(t *testing.T) {
		srv.Restart()
		deadline := time.Now().Add(storetest.Timeout)
		for {
			r := s.Eval(context.Background(), []core.Call{{Source: "return 1"}})[0]
			if r.Err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no recovery after restart: %v", r.Err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestCluster(t *testing.T) {
	c := redistest.Cluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { client.Close() })
	s := goredis.New(client)
	storetest.RunCluster(t, s, c)
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) { storetest.RunPubSub(t, s) })
	t.Run("LossOfOneNode", func(t *testing.T) { storetest.RunLoss(t, s, false, storetest.FlushMasterOf(c)) })
}

// quiet drops go-redis' log lines: the tests kill servers on purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	m.Run()
}

// TestLoss checks docs/design.md §11 on a real server that loses its data,
// by FLUSHALL and by a restart without persistence.
func TestLoss(t *testing.T) {
	srv := redistest.Server(t)
	s, _ := newStore(t, srv.Addr)
	storetest.RunLossOnServer(t, srv, s)
}
