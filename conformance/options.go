package conformance

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/presencekit/presence/core"
)

// Environment variables read by DefaultOptions.
const (
	// EnvScale multiplies the default sizes (sequences per target, race
	// duration) for long runs: PRESENCE_CONFORMANCE_SCALE=10.
	EnvScale = "PRESENCE_CONFORMANCE_SCALE"
	// EnvSeed fixes the generator's seed, to replay a reported failure.
	EnvSeed = "PRESENCE_CONFORMANCE_SEED"
)

// Default sizes, before scaling.
const (
	DefaultSequences    = 2000
	DefaultMaxSteps     = 40
	DefaultRaceDuration = 30 * time.Second
	DefaultMaxShrinks   = 400
)

// Options sizes and configures a run.
type Options struct {
	// Sequences is how many generated sequences must pass on each target.
	// Default DefaultSequences.
	Sequences int
	// MaxSteps bounds the length of a sequence; lengths grow from 1 to
	// MaxSteps over a run. Default DefaultMaxSteps.
	MaxSteps int
	// MaxShrinks bounds how many smaller sequences the shrinking of a
	// failure may try. Default DefaultMaxShrinks.
	MaxShrinks int
	// Seed seeds the generator; 0 picks one (reports print it).
	Seed int64
	// RaceDuration is how long the race suite runs its workload, in rounds
	// of a few hundred operations, each checked on its own. Zero skips it
	// (the race suite needs a server with wall-clock time).
	RaceDuration time.Duration
	// Prefix starts every key and channel the suite writes; each sequence
	// and race round adds its own suffix. Default "presence-conform-"
	// followed by a random string. It may not contain braces.
	Prefix string
	// Wrap, if set, wraps each target's Store before the suite builds an
	// engine on it: the way to plant a fault (see Intercept).
	Wrap func(core.Store) core.Store
	// NoFeed skips the checks that read published changes and kicks back
	// through a subscription.
	NoFeed bool
	// Cleanup deletes the run's keys at its end (SCAN MATCH prefix* and
	// UNLINK, through the Store), for a server the suite does not own.
	Cleanup bool
	// Progress, if set, receives a line after every few hundred sequences.
	Progress func(format string, args ...any)
}

// DefaultOptions returns the default sizes multiplied by EnvScale (when
// set to a positive number), and the seed from EnvSeed (when set).
func DefaultOptions() Options {
	o := Options{Sequences: DefaultSequences, RaceDuration: DefaultRaceDuration}
	if s, err := strconv.ParseFloat(os.Getenv(EnvScale), 64); err == nil && s > 0 {
		o.Sequences = max(1, int(float64(o.Sequences)*s))
		o.RaceDuration = time.Duration(float64(o.RaceDuration) * s)
	}
	if s, err := strconv.ParseInt(os.Getenv(EnvSeed), 10, 64); err == nil {
		o.Seed = s
	}
	return o
}

// withDefaults fills in zero fields.
func (o Options) withDefaults() Options {
	if o.Sequences <= 0 {
		o.Sequences = DefaultSequences
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.MaxShrinks <= 0 {
		o.MaxShrinks = DefaultMaxShrinks
	}
	if o.Seed == 0 {
		o.Seed = rand.Int64N(1<<53) + 1
	}
	if o.Prefix == "" {
		o.Prefix = "presence-conform-" + strconv.FormatUint(rand.Uint64(), 36)
	}
	return o
}

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// Report is the outcome of checking one target.
type Report struct {
	// Target is the target's name.
	Target string
	// Sequences counts the generated sequences that passed; Runs counts
	// every sequence run, including those shrinking a failure tried; Steps
	// counts their steps.
	Sequences, Runs, Steps int
	// Seed is the generator's seed; set EnvSeed to it to replay the run.
	Seed int64
	// Duration is the wall time of the run.
	Duration time.Duration
	// CacheHits and CacheMisses are the client-side cache statistics of a
	// caching adapter (rueidis) over the run; zero for the others.
	CacheHits, CacheMisses uint64
	// Property names the property that failed, and Failure shows the
	// failing sequence, shrunk, step by step; both empty when the target
	// passed.
	Property, Failure string
	// Err is set when the suite could not run at all (no connection).
	Err error
}

// Passed reports whether the target ran and passed.
func (r Report) Passed() bool { return r.Err == nil && r.Failure == "" }

// Summary is a one-line account of the report.
func (r Report) Summary() string {
	switch {
	case r.Err != nil:
		return fmt.Sprintf("%s: ERROR %v", r.Target, r.Err)
	case r.Failure != "":
		return fmt.Sprintf("%s: FAIL (%s) after %d passing sequences, seed %d", r.Target, r.Property, r.Sequences, r.Seed)
	}
	s := fmt.Sprintf("%s: PASS %d sequences (%d steps) in %v, seed %d", r.Target, r.Sequences, r.Steps, r.Duration.Round(time.Millisecond), r.Seed)
	if r.CacheHits+r.CacheMisses > 0 {
		s += fmt.Sprintf(", client cache %d hits / %d misses", r.CacheHits, r.CacheMisses)
	}
	return s
}
