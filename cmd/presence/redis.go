package main

import (
	"context"
	"fmt"
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
		return nil, usageError{fmt.Sprintf("--redis %q: %v", url, err)}
	}
	c := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("connecting to %s: %w", opt.Addr, err)
	}
	return &backend{store: goredis.New(c), desc: "redis at " + opt.Addr, close: func() { c.Close() }}, nil
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
