package core

import (
	"context"
	"errors"
	"time"
)

// sweepStepMicros is the server time after which a user sweep step stops
// early (sweep_users.lua reads the server's clock every few users): with
// the users it settles past it (sweepOverrunMicros), two steps fit in the
// server time one round trip may take (roundMicros), and the busy buckets
// of a sweep are sent two at a time, so that no client waits on a sweep
// for much more than 1 ms.
const sweepStepMicros = 300

// Estimated server costs of sweep steps, in µs (from the benchmarks:
// docs/performance.md), by which the sweeps send their steps in round trips
// of at most roundMicros; as bounded.go's, they group calls and decide
// nothing else.
const (
	sweepOverrunMicros  = 150 // a user step past its budget: its reads, the users until the next clock read
	sweepUserMicros     = 40  // a swept user of one device
	sweepOverheadMicros = 20  // a step's own reads and writes, its lock, the call
	sweepEntryMicros    = 2   // a scope entry a sweep step examines
	sweepProbeUsers     = 16  // the users of the first round of a user sweep, over all buckets
	shardCallMicros     = 5   // a call on one compact shard that reads its size or drops it
)

// sweepScopes runs a SweepScopes: one sweep pass over every scope bucket: due scopes lose
// their expired members (deleted after a re-check inside the script), get
// their count keys rewritten, and are released once empty for
// Config.ReleaseAfter sweeps in a row.
func (e *Engine) sweepScopes(ctx context.Context) (SweepReport, error) {
	p := e.plans.sweepScopes(e.nowArg())
	e.drive(ctx, p)
	r, err := p.Outcome()
	if err != nil || r.Visited+r.Released == 0 || e.cache == nil {
		return r, err
	}
	return r, e.fenceCache(ctx, int(e.settings.keys.scopeBuckets))
}

// fenceCache waits until the client-side cache holds none of the count
// keys that a sweep of the n scope buckets replaced.
func (e *Engine) fenceCache(ctx context.Context, n int) error {
	keys := make([]string, n)
	for b := range keys {
		keys[b] = e.plans.scopeBucketKeys(uint32(b))[0]
	}
	if err := e.cache.FenceCache(ctx, keys); err != nil {
		return &StoreError{Op: "sweep scopes", Unavailable: errors.Is(err, ErrUnavailable), Err: err}
	}
	return nil
}

// shardScan is the most entries one HSCAN step of a spread compact shard's
// sweep asks for (COUNT, shard_sweep.lua): a large (hashtable) shard is
// walked in steps of about this many, a listpack shard in one step.
const shardScan = 256

// observe widens the report's server-time span to include now.
func (r *SweepReport) observe(now int64) {
	t := time.UnixMilli(now)
	if r.first.IsZero() || t.Before(r.first) {
		r.first = t
	}
	if t.After(r.last) {
		r.last = t
	}
	r.Duration = r.last.Sub(r.first)
}
