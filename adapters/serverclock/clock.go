package serverclock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presencekit/presence/core"
)

// Pinger reads the server's clock; *core.Engine has it.
type Pinger interface {
	Ping(ctx context.Context) (time.Time, error)
}

// Config configures a Clock. Zero values mean the defaults.
type Config struct {
	// Every is how often Run reads the server's clock again. Default 30 s.
	Every time.Duration
	// Samples is how many readings one Sync takes; it keeps the one with
	// the shortest round trip, the least uncertain. Default 3.
	Samples int
	// Local is the client's own clock, which the Clock runs between
	// readings (by its monotonic reading, so that a step of the host's
	// wall clock does not move it). Default time.Now.
	Local func() time.Time
}

// ErrNotSynced is returned by Offset before the first successful Sync.
var ErrNotSynced = errors.New("serverclock: not synced yet")

// Clock follows the Redis server's clock: its Now is a core.Config.Clock.
// Before its first Sync it runs on the client's clock. It is safe for
// concurrent use.
type Clock struct {
	cfg Config

	mu       sync.Mutex // serializes Sync
	reading  atomic.Pointer[reading]
	lastNano atomic.Int64 // the latest instant Now returned, so that it never goes back
}

// reading is one reading of the server's clock: server is the server's
// time at the client's instant local.
type reading struct {
	server, local time.Time
	rtt           time.Duration
}

// New returns a Clock, or an *core.InputError for a bad Config.
func New(cfg Config) (*Clock, error) {
	switch {
	case cfg.Every < 0:
		return nil, &core.InputError{Field: "Config.Every", Reason: "is negative"}
	case cfg.Samples < 0 || cfg.Samples > 100:
		return nil, &core.InputError{Field: "Config.Samples", Reason: fmt.Sprintf("%d is outside 0..100", cfg.Samples)}
	}
	if cfg.Every == 0 {
		cfg.Every = 30 * time.Second
	}
	if cfg.Samples == 0 {
		cfg.Samples = 3
	}
	if cfg.Local == nil {
		cfg.Local = time.Now
	}
	return &Clock{cfg: cfg}, nil
}

// Now returns the server's current time as the last reading estimates it
// (the client's time before the first), never earlier than an instant it
// returned before: a new reading may set the estimate back by a little.
func (c *Clock) Now() time.Time {
	local := c.cfg.Local()
	t := local
	if r := c.reading.Load(); r != nil {
		t = r.server.Add(local.Sub(r.local))
	}
	n := t.UnixNano()
	for {
		last := c.lastNano.Load()
		if n <= last {
			return time.Unix(0, last)
		}
		if c.lastNano.CompareAndSwap(last, n) {
			return time.Unix(0, n)
		}
	}
}

// Sync reads the server's clock Config.Samples times and keeps the reading
// with the shortest round trip. On an error it keeps the previous reading
// and returns the error.
func (c *Clock) Sync(ctx context.Context, p Pinger) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *reading
	for range c.cfg.Samples {
		sent := c.cfg.Local()
		server, err := p.Ping(ctx)
		if err != nil {
			return fmt.Errorf("serverclock: reading the server's clock: %w", err)
		}
		back := c.cfg.Local()
		rtt := back.Sub(sent)
		if best != nil && rtt >= best.rtt {
			continue
		}
		// The server read its clock somewhere in the round trip, most
		// likely halfway, and truncated it to the millisecond.
		best = &reading{server: server.Add(time.Millisecond / 2), local: sent.Add(rtt / 2), rtt: rtt}
	}
	c.reading.Store(best)
	return nil
}

// Offset returns how far the server's clock is ahead of the client's by the
// last reading, and that reading's round trip, which bounds its error (with
// the server clock's millisecond); ErrNotSynced before the first reading.
func (c *Clock) Offset() (offset, rtt time.Duration, err error) {
	r := c.reading.Load()
	if r == nil {
		return 0, 0, ErrNotSynced
	}
	return r.server.Sub(r.local), r.rtt, nil
}

// Run calls Sync every Config.Every until ctx ends, and returns ctx's
// error. A failed Sync keeps the previous reading; Run tries again at the
// next tick and reports the failure to onError when it is not nil.
func (c *Clock) Run(ctx context.Context, p Pinger, onError func(error)) error {
	tick := time.NewTicker(c.cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := c.Sync(ctx, p); err != nil && onError != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}
