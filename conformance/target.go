package conformance

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	goredisadapter "github.com/presencekit/presence/adapters/goredis"
	redigoadapter "github.com/presencekit/presence/adapters/redigo"
	rueidisadapter "github.com/presencekit/presence/adapters/rueidis"
	"github.com/presencekit/presence/core"
)

// Target is one system under test: an adapter on a backend. The suite
// compares every target with the reference model, core.Model.
//
// A Target only describes how to connect; Open is called once per run, and
// the run's sequences share the Backend it returns, one after the other, each
// under a fresh key prefix, so one server serves any number of sequences
// without being flushed. Targets for other topologies (Redis Cluster through
// go-redis' ClusterClient, rueidis or redisc) are written the same way: a
// Name, and an Open that returns the adapter's Store.
type Target struct {
	// Name identifies the target in reports, as "adapter/backend", such as
	// "goredis/miniredis" or "rueidis/redis-server".
	Name string
	// Adapter is the adapter's name alone ("goredis", "redigo", "rueidis"),
	// for tables that group targets by adapter.
	Adapter string
	// Open connects to the backend.
	Open func(ctx context.Context) (*Backend, error)
}

// Backend is an open Target.
type Backend struct {
	// Store is the adapter under test. The suite wraps it with
	// Options.Wrap, if set, and builds engines on it with New.
	Store core.Store
	// New builds the Presence under test on store (Store, wrapped). Nil
	// means core.New, which is what every adapter target wants; a target
	// that runs the core elsewhere (a WebAssembly build, a remote service)
	// supplies its own. Feed checks need a *core.Engine and are skipped
	// for anything else.
	New func(store core.Store, cfg core.Config) (core.Presence, error)
	// SetTime moves the server's clock, and its key expiry with it, to t.
	// Nil for a server that keeps wall-clock time: there the suite gives
	// keys lifetimes longer than any sequence (see the package doc).
	SetTime func(t time.Time)
	// Reset, if set, empties the backend between sequences. Only for a
	// backend the target owns (an embedded miniredis), never for a shared
	// server.
	Reset func()
	// Close releases the backend's clients and servers.
	Close func() error
	// ApproxTolerance is how far the backend's HyperLogLog estimate may be
	// from the exact count. Nil means Redis's own sketch: 1 + exact/50.
	ApproxTolerance func(exact int64) int64
}

// tolerance is b's ApproxTolerance, or Redis's.
func (b *Backend) tolerance(exact int64) int64 {
	if b.ApproxTolerance != nil {
		return b.ApproxTolerance(exact)
	}
	return redisTolerance(exact)
}

// miniredisTolerance bounds miniredis's HyperLogLog, a sketch of its own
// whose merged estimates of a few members can be 2 off (5 for 3 members
// touched across three buckets), where Redis's are exact.
func miniredisTolerance(exact int64) int64 { return 2 + exact/10 }

// virtual reports whether the backend's key expiry follows the suite's clock.
func (b *Backend) virtual() bool { return b.SetTime != nil }

func (b *Backend) newPresence(store core.Store, cfg core.Config) (core.Presence, error) {
	if b.New != nil {
		return b.New(store, cfg)
	}
	return core.New(store, cfg)
}

// Adapters are the adapter names, in the order targets are listed.
var Adapters = []string{"goredis", "redigo", "rueidis"}

// MiniredisTargets returns one target per adapter, each on an embedded
// miniredis of its own whose clock, and key expiry, follow the suite's
// virtual clock (SetTime with ClockTTL). rueidis runs there without
// client-side caching and over RESP2, which miniredis needs.
func MiniredisTargets() []Target {
	open := func(client func(addr string) (core.Store, func() error, error)) func(context.Context) (*Backend, error) {
		return func(ctx context.Context) (*Backend, error) {
			mr := miniredis.NewMiniRedis()
			if err := mr.Start(); err != nil {
				return nil, fmt.Errorf("conformance: starting miniredis: %w", err)
			}
			mr.ClockTTL(true)
			store, closeClient, err := client(mr.Addr())
			if err != nil {
				mr.Close()
				return nil, err
			}
			return &Backend{
				Store:           store,
				SetTime:         mr.SetTime,
				Reset:           mr.FlushAll,
				ApproxTolerance: miniredisTolerance,
				Close: func() error {
					err := closeClient()
					mr.Close()
					return err
				},
			}, nil
		}
	}
	return []Target{
		{Name: "goredis/miniredis", Adapter: "goredis", Open: open(func(addr string) (core.Store, func() error, error) {
			return newGoredis(&goredis.Options{Addr: addr})
		})},
		{Name: "redigo/miniredis", Adapter: "redigo", Open: open(func(addr string) (core.Store, func() error, error) {
			return newRedigo(ServerOptions{Addr: addr})
		})},
		{Name: "rueidis/miniredis", Adapter: "rueidis", Open: open(func(addr string) (core.Store, func() error, error) {
			return newRueidis(rueidis.ClientOption{InitAddress: []string{addr},
				DisableCache: true, ForceSingleClient: true, AlwaysRESP2: true})
		})},
	}
}

// ServerOptions says how to reach a single Redis (or compatible) server.
type ServerOptions struct {
	// Addr is "host:port".
	Addr string
	// Username and Password authenticate (AUTH); empty for none.
	Username, Password string
	// DB selects the database; 0 by default.
	DB int
	// TLS, if set, connects over TLS.
	TLS *tls.Config
	// NoClientCache turns rueidis' client-side caching off, for servers
	// without CLIENT TRACKING (Redis before 6, some compatible servers).
	NoClientCache bool
}

// AdapterTargets returns one target per adapter on the single server at
// addr ("host:port"), which keeps wall-clock time. rueidis uses client-side
// caching there, so the suite also checks that a count read from the cache
// is invalidated by the sweep that rewrites it.
func AdapterTargets(addr string) []Target {
	return ServerTargets(ServerOptions{Addr: addr}, "redis-server")
}

// ParseServerURL reads a redis:// or rediss:// URL, as "presence conform
// --redis" takes it: host and port, user, password, database number, TLS.
func ParseServerURL(url string) (ServerOptions, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return ServerOptions{}, fmt.Errorf("conformance: %w", err)
	}
	return ServerOptions{Addr: opt.Addr, Username: opt.Username, Password: opt.Password, DB: opt.DB, TLS: opt.TLSConfig}, nil
}

// AdapterTargetsURL is AdapterTargets for a redis:// or rediss:// URL (see
// ParseServerURL). backend names the server in target names.
func AdapterTargetsURL(url, backend string) ([]Target, error) {
	o, err := ParseServerURL(url)
	if err != nil {
		return nil, err
	}
	return ServerTargets(o, backend), nil
}

// ServerTargets returns one target per adapter on the server described by
// o; backend names the server in the targets' names ("adapter/backend").
func ServerTargets(o ServerOptions, backend string) []Target {
	wall := func(client func() (core.Store, func() error, error)) func(context.Context) (*Backend, error) {
		return func(ctx context.Context) (*Backend, error) {
			store, closeClient, err := client()
			if err != nil {
				return nil, err
			}
			return &Backend{Store: store, Close: closeClient}, nil
		}
	}
	return []Target{
		{Name: "goredis/" + backend, Adapter: "goredis", Open: wall(func() (core.Store, func() error, error) {
			return newGoredis(&goredis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLS})
		})},
		{Name: "redigo/" + backend, Adapter: "redigo", Open: wall(func() (core.Store, func() error, error) {
			return newRedigo(o)
		})},
		{Name: "rueidis/" + backend, Adapter: "rueidis", Open: wall(func() (core.Store, func() error, error) {
			return newRueidis(rueidis.ClientOption{InitAddress: []string{o.Addr}, Username: o.Username,
				Password: o.Password, SelectDB: o.DB, TLSConfig: o.TLS, DisableCache: o.NoClientCache})
		})},
	}
}

func newGoredis(opt *goredis.Options) (core.Store, func() error, error) {
	opt.DialTimeout = 5 * time.Second
	c := goredis.NewClient(opt)
	return goredisadapter.New(c), c.Close, nil
}

func newRedigo(o ServerOptions) (core.Store, func() error, error) {
	opts := []redigo.DialOption{redigo.DialConnectTimeout(5 * time.Second), redigo.DialDatabase(o.DB)}
	if o.Username != "" {
		opts = append(opts, redigo.DialUsername(o.Username))
	}
	if o.Password != "" {
		opts = append(opts, redigo.DialPassword(o.Password))
	}
	if o.TLS != nil {
		opts = append(opts, redigo.DialUseTLS(true), redigo.DialTLSConfig(o.TLS))
	}
	pool := &redigo.Pool{
		DialContext: func(ctx context.Context) (redigo.Conn, error) {
			return redigo.DialContext(ctx, "tcp", o.Addr, opts...)
		},
		MaxIdle:     16,
		IdleTimeout: time.Minute,
	}
	return redigoadapter.New(pool), pool.Close, nil
}

func newRueidis(opt rueidis.ClientOption) (core.Store, func() error, error) {
	opt.Dialer.Timeout = 5 * time.Second
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, nil, fmt.Errorf("conformance: rueidis: %w", err)
	}
	return rueidisadapter.New(c), func() error { c.Close(); return nil }, nil
}
