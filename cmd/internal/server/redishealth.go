package server

import (
	"sync"
	"time"
)

// RedisHealth is whether this instance reaches Redis, as its event hub
// last found when reading the change log (every PollInterval): what the
// dashboard shows as an outage banner.
type RedisHealth struct {
	// Up is false while the last reads of the change log failed.
	Up bool `json:"up"`
	// DownSince is when the first failed read of the outage happened (ms
	// since the epoch, this host's clock); 0 while up.
	DownSince int64 `json:"down_since,omitempty"`
	// DownMS is how long Redis has been unreachable, as of this answer.
	DownMS int64 `json:"down_ms,omitempty"`
	// Error is the last read's error while down.
	Error string `json:"error,omitempty"`
	// CheckedAt is the last read, failed or not (ms since the epoch); 0
	// before the first.
	CheckedAt int64 `json:"checked_at,omitempty"`
}

// redisHealth records the hub's reads. The zero value is up.
type redisHealth struct {
	mu      sync.Mutex
	down    time.Time // first failure of the outage; zero while up
	err     string
	checked time.Time
}

// record notes a read begun at now that failed with err, or succeeded (nil).
func (h *redisHealth) record(now time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checked = now
	switch {
	case err == nil:
		h.down, h.err = time.Time{}, ""
	case h.down.IsZero():
		h.down, h.err = now, err.Error()
	default:
		h.err = err.Error()
	}
}

// snapshot returns the health as of now.
func (h *redisHealth) snapshot(now time.Time) RedisHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := RedisHealth{Up: h.down.IsZero(), CheckedAt: millis(h.checked)}
	if !out.Up {
		out.DownSince, out.DownMS, out.Error = millis(h.down), now.Sub(h.down).Milliseconds(), h.err
	}
	return out
}
