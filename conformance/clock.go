package conformance

import (
	"sync/atomic"
	"time"
)

// clock is the virtual clock a sequence's model and engine share.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now returns the virtual instant.
func (c *clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

func (c *clock) advance(d time.Duration) time.Time {
	return time.Unix(0, c.ns.Add(int64(d))).UTC()
}

// frozenClock is one worker's clock in the race suite: it reads a shared
// instant when an operation starts and keeps it for the whole operation, so
// that every script of the operation sees the same "now".
type frozenClock struct{ ms atomic.Int64 }

// Now returns the instant the current operation started at.
func (c *frozenClock) Now() time.Time { return time.UnixMilli(c.ms.Load()).UTC() }
