package benchkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	goredisstore "github.com/presencekit/presence/adapters/goredis"
	redigostore "github.com/presencekit/presence/adapters/redigo"
	rueidisstore "github.com/presencekit/presence/adapters/rueidis"
	"github.com/presencekit/presence/core"
)

// Adapter names, as Suite.Adapters takes them.
const (
	AdapterGoRedis = "goredis"
	AdapterRedigo  = "redigo"
	AdapterRueidis = "rueidis"
	// AdapterRueidisFlush is the rueidis adapter on a client set up as
	// Centrifuge's Redis shard sets up its own: every command pipelined
	// (AlwaysPipelining) and each write to the socket held up to 100 µs
	// (MaxFlushDelay) to gather more. It trades latency for fewer system
	// calls on both sides, which pays with many concurrent callers.
	AdapterRueidisFlush = "rueidis-flush"
)

// Adapters lists every adapter, in the order reports show them.
func Adapters() []string { return []string{AdapterGoRedis, AdapterRedigo, AdapterRueidis} }

// Variants lists the client settings Dial accepts besides Adapters(): the
// same adapters on differently configured clients.
func Variants() []string { return []string{AdapterRueidisFlush} }

// CentrifugeFlushDelay is the MaxFlushDelay Centrifuge v0.40.1 gives its
// rueidis clients, which AdapterRueidisFlush copies.
const CentrifugeFlushDelay = 100 * time.Microsecond

// ErrUnknownAdapter is returned for an adapter name not in Adapters or Variants.
var ErrUnknownAdapter = errors.New("benchkit: unknown adapter")

// Conn is one adapter's store with the client beneath it.
type Conn struct {
	Name  string
	Store core.Store
	// Rueidis is the rueidis adapter's store (nil for the others), for its
	// cache statistics.
	Rueidis *rueidisstore.Store
	// RueidisClient is the rueidis client beneath it, for plain reads.
	RueidisClient rueidis.Client
	close         func()
}

// Close closes the client.
func (c *Conn) Close() {
	if c.close != nil {
		c.close()
	}
}

// Dial connects adapter name to the server at url (redis://host:port[/db]),
// with room for about poolSize concurrent calls, and checks the connection
// with a first call.
func Dial(ctx context.Context, name, url string, poolSize int) (*Conn, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("benchkit: redis URL %q: %w", url, err)
	}
	if poolSize < 1 {
		poolSize = 1
	}
	var c *Conn
	switch name {
	case AdapterGoRedis:
		opt.PoolSize = poolSize + 2
		opt.MinIdleConns = poolSize
		cl := redis.NewClient(opt)
		c = &Conn{Name: name, Store: goredisstore.New(cl), close: func() { _ = cl.Close() }}
	case AdapterRedigo:
		addr, db, pass := opt.Addr, opt.DB, opt.Password
		pool := &redigo.Pool{
			MaxIdle:     poolSize + 2,
			MaxActive:   0,
			IdleTimeout: time.Minute,
			DialContext: func(ctx context.Context) (redigo.Conn, error) {
				return redigo.DialContext(ctx, "tcp", addr, redigo.DialDatabase(db), redigo.DialPassword(pass),
					redigo.DialConnectTimeout(5*time.Second), redigo.DialReadTimeout(30*time.Second))
			},
		}
		c = &Conn{Name: name, Store: redigostore.New(pool), close: func() { _ = pool.Close() }}
	case AdapterRueidis, AdapterRueidisFlush:
		copt := rueidis.ClientOption{
			InitAddress: []string{opt.Addr}, SelectDB: opt.DB, Password: opt.Password, Username: opt.Username,
		}
		if name == AdapterRueidisFlush {
			copt.AlwaysPipelining, copt.MaxFlushDelay = true, CentrifugeFlushDelay
		}
		cl, err := rueidis.NewClient(copt)
		if err != nil {
			return nil, &DialError{Adapter: name, Err: err}
		}
		st := rueidisstore.New(cl)
		c = &Conn{Name: name, Store: st, Rueidis: st, RueidisClient: cl, close: cl.Close}
	default:
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknownAdapter, name, strings.Join(append(Adapters(), Variants()...), ", "))
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res := c.Store.Eval(pctx, []core.Call{{Source: "return 1"}})
	if len(res) != 1 || res[0].Err != nil {
		c.Close()
		var err error = errors.New("no reply")
		if len(res) == 1 {
			err = res[0].Err
		}
		return nil, &DialError{Adapter: name, Err: err}
	}
	return c, nil
}

// DialError is a failure to connect an adapter.
type DialError struct {
	Adapter string
	Err     error
}

// Error names the adapter.
func (e *DialError) Error() string { return "benchkit: connecting " + e.Adapter + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *DialError) Unwrap() error { return e.Err }
