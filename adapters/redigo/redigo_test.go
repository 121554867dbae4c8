package redigo_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/presencekit/presence/adapters/redigo"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/storetest"
)

// newPool returns a pool of connections to addr, closed at the end of the
// test.
func newPool(tb testing.TB, addr string) *redis.Pool {
	tb.Helper()
	p := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr,
				redis.DialConnectTimeout(2*time.Second), redis.DialReadTimeout(5*time.Second))
		},
		MaxIdle: 4,
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

func TestMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	s := redigo.New(newPool(t, m.Addr()))
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) { storetest.RunPubSub(t, s) })
	t.Run("Unavailable", func(t *testing.T) {
		m.Close()
		storetest.CheckUnavailable(t, s)
	})
}

func TestRealServer(t *testing.T) {
	srv := redistest.Server(t)
	s := redigo.New(newPool(t, srv.Addr))
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) { storetest.RunPubSub(t, s) })
	t.Run("DriverErrorStaysReachable", func(t *testing.T) {
		r := storetest.Eval(t, s, core.Call{SHA: "0000000000000000000000000000000000000000"})[0]
		var re redis.Error
		if !errors.As(r.Err, &re) {
			t.Fatalf("NOSCRIPT error %v does not unwrap to a redis.Error", r.Err)
		}
	})
	t.Run("SubscriberSeesLostServer", func(t *testing.T) {
		msgs, stop, err := s.Subscribe(context.Background(), "lost")
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		srv.Kill()
		select {
		case _, ok := <-msgs:
			if ok {
				t.Fatal("unexpected message")
			}
		case <-time.After(storetest.Timeout):
			t.Fatal("channel not closed after the server died")
		}
	})
	t.Run("Unavailable", func(t *testing.T) {
		srv.Kill()
		storetest.CheckUnavailable(t, s)
	})
}

func TestCluster(t *testing.T) {
	c := redistest.Cluster(t, 3)
	cluster := &redisc.Cluster{
		StartupNodes: c.Addrs(),
		DialOptions:  []redis.DialOption{redis.DialConnectTimeout(2 * time.Second), redis.DialReadTimeout(5 * time.Second)},
		CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
			return &redis.Pool{
				DialContext: func(ctx context.Context) (redis.Conn, error) {
					return redis.DialContext(ctx, "tcp", addr, opts...)
				},
				MaxIdle: 4,
			}, nil
		},
	}
	t.Cleanup(func() { cluster.Close() })
	if err := cluster.Refresh(); err != nil {
		t.Fatal(err)
	}
	s := redigo.NewCluster(cluster)
	storetest.RunCluster(t, s, c)
	storetest.Run(t, s)
	t.Run("PubSub", func(t *testing.T) { storetest.RunPubSub(t, s) })
	t.Run("LossOfOneNode", func(t *testing.T) { storetest.RunLoss(t, s, false, storetest.FlushMasterOf(c)) })
	t.Run("StaleSlotMap", func(t *testing.T) {
		// A cluster that knows only one node learns the others through
		// MOVED replies.
		stale := &redisc.Cluster{StartupNodes: c.Addrs()[:1], CreatePool: cluster.CreatePool}
		t.Cleanup(func() { stale.Close() })
		storetest.RunCluster(t, redigo.NewCluster(stale), c)
	})
}

// fakeConn replays scripted replies; an error in replies ends the
// connection with that error.
type fakeConn struct {
	replies []any
	sent    int
}

func (f *fakeConn) Close() error { return nil }
func (f *fakeConn) Err() error   { return nil }
func (f *fakeConn) Do(string, ...any) (any, error) {
	return nil, nil
}
func (f *fakeConn) DoContext(context.Context, string, ...any) (any, error) { return nil, nil }
func (f *fakeConn) Send(string, ...any) error                              { f.sent++; return nil }
func (f *fakeConn) Flush() error                                           { return nil }
func (f *fakeConn) Receive() (any, error) {
	if len(f.replies) == 0 {
		return nil, io.EOF
	}
	r := f.replies[0]
	f.replies = f.replies[1:]
	switch v := r.(type) {
	case redis.Error:
		return nil, v
	case error:
		f.replies = []any{v}
		return nil, v
	}
	return r, nil
}
func (f *fakeConn) ReceiveContext(context.Context) (any, error) { return f.Receive() }

func TestConnectionLostMidBatch(t *testing.T) {
	fake := &fakeConn{replies: []any{
		int64(1),
		redis.Error("NOSCRIPT No matching script. Please use EVAL."),
		[]byte("x"),
		io.ErrUnexpectedEOF,
	}}
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return fake, nil }}
	defer pool.Close()
	calls := make([]core.Call, 6)
	for i := range calls {
		calls[i] = core.Call{Source: "return 1"}
	}
	calls[4].Keys = []string{"{a}", "{b}"}
	results := redigo.New(pool).Eval(context.Background(), calls)
	if results[0].Err != nil || results[0].Value.Kind != core.ValueInt || results[0].Value.Int != 1 {
		t.Fatalf("0: %v %v", results[0].Value, results[0].Err)
	}
	if !errors.Is(results[1].Err, core.ErrNoScript) {
		t.Fatalf("1: %v", results[1].Err)
	}
	if results[2].Err != nil || results[2].Value.Str != "x" {
		t.Fatalf("2: %v %v", results[2].Value, results[2].Err)
	}
	for _, i := range []int{3, 5} {
		if !errors.Is(results[i].Err, core.ErrUnavailable) || !errors.Is(results[i].Err, io.ErrUnexpectedEOF) {
			t.Fatalf("%d: got %v, want ErrUnavailable wrapping the cause", i, results[i].Err)
		}
	}
	if !errors.Is(results[4].Err, core.ErrCrossSlot) {
		t.Fatalf("4: %v", results[4].Err)
	}
	if fake.sent != 5 {
		t.Fatalf("sent %d commands, want 5 (the cross-slot call held back)", fake.sent)
	}
}

// TestLoss checks docs/design.md §11 on a real server that loses its data,
// by FLUSHALL and by a restart without persistence.
func TestLoss(t *testing.T) {
	srv := redistest.Server(t)
	s := redigo.New(newPool(t, srv.Addr))
	storetest.RunLossOnServer(t, srv, s)
}
