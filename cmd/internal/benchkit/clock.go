package benchkit

import (
	"sync/atomic"
	"time"
)

// VirtualClock is a clock that moves only when told, so that a workload
// can age a backlog instantly instead of waiting for it to expire. Its Now
// is a core.Config.Clock. It is safe for concurrent use.
type VirtualClock struct{ ms atomic.Int64 }

// NewVirtualClock returns a clock standing at t (to the millisecond).
func NewVirtualClock(t time.Time) *VirtualClock {
	c := &VirtualClock{}
	c.ms.Store(t.UnixMilli())
	return c
}

// Now returns the clock's instant.
func (c *VirtualClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Advance moves the clock forward by d.
func (c *VirtualClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }
