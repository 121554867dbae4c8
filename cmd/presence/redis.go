package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// backend is the Redis a command runs against.
type backend struct {
	store core.Store
	mini  *miniredis.Miniredis // nil for a real server
	desc  string
	close func()
}

// openBackend connects to url, or starts an embedded miniredis when url is
// empty. The embedded server keeps its state for the life of the process.
func openBackend(ctx context.Context, url string) (*backend, error) {
	if url == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, fmt.Errorf("starting embedded miniredis: %w", err)
		}
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		return &backend{store: goredis.New(c), mini: mr, desc: "embedded miniredis at " + mr.Addr(),
			close: func() { c.Close(); mr.Close() }}, nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, usageError{msg: fmt.Sprintf("--redis %q: %v", redactURL(url), err)}
	}
	c := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, reachError(opt.Addr, err)
	}
	return &backend{store: goredis.New(c), desc: "redis at " + opt.Addr, close: func() { c.Close() }}, nil
}

// dialTimeout bounds the first contact with Redis: a server that does not
// answer by then is reported as unreachable.
const dialTimeout = 5 * time.Second

// pingRedis checks that the server at url answers, for commands whose
// Redis clients are opened elsewhere (conform, bench): without it a
// refused connection would surface from deep inside a run, once per client.
func pingRedis(ctx context.Context, url string) error {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return usageError{msg: fmt.Sprintf("--redis %q: %v", redactURL(url), err)}
	}
	c := redis.NewClient(opt)
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		return reachError(opt.Addr, err)
	}
	return nil
}

// reachError reports a failed first contact with Redis at where (host:port,
// or seed nodes) in one line: "cannot reach Redis at 127.0.0.1:1:
// connection refused" when the network failed, without the dial's own
// wording (which repeats the address), or the server's refusal (AUTH, TLS…)
// as it came.
func reachError(where string, err error) error {
	var (
		sys     *os.SyscallError
		dns     *net.DNSError
		op      *net.OpError
		timeout interface{ Timeout() bool }
	)
	reason := ""
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &dns):
		reason = "looking up " + dns.Name + ": " + dns.Err
	case errors.As(err, &sys):
		reason = sys.Err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		reason = "no answer in time"
	case errors.As(err, &op):
		reason = op.Err.Error()
	default:
		// Some drivers join several errors in lines; the command prints one.
		return fmt.Errorf("Redis at %s: %s", where, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return fmt.Errorf("cannot reach Redis at %s: %s", where, reason)
}

// redisAddr is the host:port (or socket path) of a redis:// URL, for
// messages; the URL itself may hold a password.
func redisAddr(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return redactURL(u)
	}
	if p.Scheme == "unix" {
		return p.Path
	}
	if p.Port() == "" {
		return net.JoinHostPort(p.Hostname(), "6379")
	}
	return p.Host
}

// go-redis logs to stderr by default: a refused connection would print its
// pool's retries before the command's own error. Its lines go through
// log/slog instead, to driverLog: dropped while unset (the commands report
// what failed themselves), serve's logger while serving. rueidis and
// redigo have no logger.
func init() { redis.SetLogger(goredisLog{}) }

var driverLog atomic.Pointer[slog.Logger]

// goredisLog is go-redis' logger on log/slog. go-redis logs no levels; its
// lines are connection trouble, so they are warnings.
type goredisLog struct{}

func (goredisLog) Printf(ctx context.Context, format string, v ...any) {
	if l := driverLog.Load(); l != nil {
		l.Log(ctx, slog.LevelWarn, fmt.Sprintf(format, v...), "driver", "go-redis")
	}
}

// virtualClock is a clock the command moves by hand; on an embedded server
// it moves the server's clock and key expiry along.
type virtualClock struct {
	t    time.Time
	mini *miniredis.Miniredis
}

func newVirtualClock(start time.Time, mini *miniredis.Miniredis) *virtualClock {
	c := &virtualClock{t: start, mini: mini}
	if mini != nil {
		mini.SetTime(start)
		mini.ClockTTL(true)
	}
	return c
}

// Now returns the virtual instant.
func (c *virtualClock) Now() time.Time { return c.t }

// Set moves the clock to t.
func (c *virtualClock) Set(t time.Time) {
	c.t = t
	if c.mini != nil {
		c.mini.SetTime(t)
	}
}
