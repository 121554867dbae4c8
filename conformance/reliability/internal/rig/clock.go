package rig

import (
	"sync"
	"time"
)

// T0 is the first instant of the injected clocks: 2023-11-14 22:13:20 UTC.
var T0 = time.UnixMilli(1_700_000_000_000)

// Clock is a clock that only moves when told: forwards, or backwards as a
// stepped clock would. Its Now is a core.Config.Clock. It is safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d, which may be negative.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
