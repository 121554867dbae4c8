package rig

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	redigolib "github.com/gomodule/redigo/redis"
	goredislib "github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/adapters/redigo"
	"github.com/presencekit/presence/adapters/rueidis"
	"github.com/presencekit/presence/core"
)

// Client timeouts of every adapter. Calls are bounded by their contexts;
// these bound what a context does not (dialing, a write into a full socket).
const (
	DialTimeout = time.Second
	IOTimeout   = 3 * time.Second
)

// Adapter opens a core.Store on one driver.
type Adapter struct {
	// Name is the adapter's package name: "goredis", "redigo" or "rueidis".
	Name string
	// Open returns a Store on a new client of addr; the client is closed
	// when the test ends.
	Open func(tb testing.TB, addr string) core.Store
}

// Adapters returns the three adapters, each on a client configured as a
// service would run it: context deadlines honoured, the driver's own retry
// policy left at its default (go-redis resends a pipeline after a network
// error; redigo never resends; rueidis resends read-only commands only), and
// rueidis with client-side caching on.
func Adapters() []Adapter {
	return []Adapter{
		{Name: "goredis", Open: OpenGoredis},
		{Name: "redigo", Open: OpenRedigo},
		{Name: "rueidis", Open: OpenRueidis},
	}
}

// OpenGoredis returns a goredis Store on a go-redis client of addr with
// ContextTimeoutEnabled, so that a call's deadline reaches the socket.
func OpenGoredis(tb testing.TB, addr string) core.Store {
	tb.Helper()
	quietGoredis.Do(func() { goredislib.SetLogger(goredisLog{}) })
	c := goredislib.NewClient(&goredislib.Options{
		Addr:                  addr,
		DialTimeout:           DialTimeout,
		ReadTimeout:           IOTimeout,
		WriteTimeout:          IOTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              64,
	})
	tb.Cleanup(func() { c.Close() })
	return goredis.New(c)
}

// OpenRedigo returns a redigo Store on a pool of addr that keeps up to 64
// idle connections.
func OpenRedigo(tb testing.TB, addr string) core.Store {
	tb.Helper()
	p := &redigolib.Pool{
		MaxIdle:     64,
		IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redigolib.Conn, error) {
			return redigolib.DialContext(ctx, "tcp", addr,
				redigolib.DialConnectTimeout(DialTimeout),
				redigolib.DialReadTimeout(IOTimeout),
				redigolib.DialWriteTimeout(IOTimeout))
		},
	}
	tb.Cleanup(func() { p.Close() })
	return redigo.New(p)
}

// OpenRueidis returns a rueidis Store on a rueidis client of addr, with
// client-side caching.
func OpenRueidis(tb testing.TB, addr string) core.Store {
	tb.Helper()
	c, err := rueidislib.NewClient(rueidislib.ClientOption{
		InitAddress:      []string{addr},
		Dialer:           net.Dialer{Timeout: DialTimeout},
		ConnWriteTimeout: IOTimeout,
	})
	if err != nil {
		tb.Fatalf("rig: rueidis client: %v", err)
	}
	tb.Cleanup(c.Close)
	return rueidis.New(c)
}

// Engine returns an engine on store, failing the test on a bad config.
func Engine(tb testing.TB, store core.Store, cfg core.Config) *core.Engine {
	tb.Helper()
	e, err := core.New(store, cfg)
	if err != nil {
		tb.Fatalf("rig: engine: %v", err)
	}
	return e
}

// quietGoredis keeps go-redis from printing a line for every dial that
// fails while a server is down (it logs through a global logger).
var quietGoredis sync.Once

// GoredisLogLines counts the lines go-redis would have printed.
var GoredisLogLines atomic.Int64

type goredisLog struct{}

func (goredisLog) Printf(context.Context, string, ...any) { GoredisLogLines.Add(1) }
