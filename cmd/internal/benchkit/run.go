package benchkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one operation of a workload. worker is the calling worker (0 to
// Load.Concurrency-1) and seq the operation's number, unique within a run.
// It returns how many items (beats, touches, reads) the operation carried.
type Op func(ctx context.Context, worker, seq int) (items int, err error)

// Load bounds one run of an Op.
type Load struct {
	// Concurrency is the number of workers. Default 1.
	Concurrency int
	// Duration bounds the run's wall time. Default 1 s.
	Duration time.Duration
	// MaxOps bounds the number of operations. Default 10,000,000.
	MaxOps int
	// MaxErrors ends the run early once this many operations failed.
	// Default 100.
	MaxErrors int
}

func (l Load) withDefaults() Load {
	if l.Concurrency < 1 {
		l.Concurrency = 1
	}
	if l.Duration <= 0 {
		l.Duration = time.Second
	}
	if l.MaxOps < 1 {
		l.MaxOps = 10_000_000
	}
	if l.MaxErrors < 1 {
		l.MaxErrors = 100
	}
	return l
}

// Result is what one run measured.
type Result struct {
	Ops     int           // operations completed, failed ones included
	Items   int           // items carried by successful operations
	Errors  int           // failed operations
	Elapsed time.Duration // wall time of the run
	Latency Hist          // per-operation latency
	// FirstErr is the first failure, if any.
	FirstErr error
}

// OpsPerSec returns completed operations per second.
func (r *Result) OpsPerSec() float64 { return perSec(r.Ops, r.Elapsed) }

// ItemsPerSec returns items per second.
func (r *Result) ItemsPerSec() float64 { return perSec(r.Items, r.Elapsed) }

func perSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ErrTooManyErrors ends a run whose operations kept failing.
var ErrTooManyErrors = errors.New("benchkit: too many failed operations")

// Run calls op from load.Concurrency workers until load.Duration has passed,
// load.MaxOps operations were started, or ctx ends, and measures each call.
// It returns an error (wrapping ErrTooManyErrors and the first failure) when
// load.MaxErrors operations failed; a few failures are counted in the
// Result instead.
func Run(ctx context.Context, load Load, op Op) (Result, error) {
	load = load.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, load.Duration)
	defer cancel()
	var (
		seq     atomic.Int64
		errs    atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		res     Result
		workers = make([]workerStats, load.Concurrency)
	)
	start := time.Now()
	deadline, _ := ctx.Deadline()
	for w := range workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			st := &workers[w]
			for ctx.Err() == nil {
				i := int(seq.Add(1) - 1)
				if i >= load.MaxOps {
					return
				}
				t0 := time.Now()
				n, err := op(ctx, w, i)
				d := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil || !time.Now().Before(deadline) {
						// The run's end interrupted it: not a failure. (A
						// driver may see the deadline pass before ctx's
						// timer fires, so check the clock too.)
						return
					}
					st.errors++
					mu.Lock()
					if res.FirstErr == nil {
						res.FirstErr = err
					}
					mu.Unlock()
					if errs.Add(1) >= int64(load.MaxErrors) {
						cancel()
						return
					}
					continue
				}
				st.ops++
				st.items += n
				st.hist.Record(d)
			}
		}(w)
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	for w := range workers {
		res.Ops += workers[w].ops + workers[w].errors
		res.Items += workers[w].items
		res.Errors += workers[w].errors
		res.Latency.Merge(&workers[w].hist)
	}
	if res.Errors >= load.MaxErrors {
		return res, fmt.Errorf("%w: %d failed, first: %w", ErrTooManyErrors, res.Errors, res.FirstErr)
	}
	return res, nil
}

// workerStats is one worker's tally, merged after the run.
type workerStats struct {
	ops, items, errors int
	hist               Hist
}
