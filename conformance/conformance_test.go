package conformance_test

import (
	"os"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/testtier"
)

// Sizes of the everyday tier (the README's test command). The teeth tests
// plant their bugs at these very sizes, so that the everyday suite is known
// to catch each of them.
const (
	everydaySequences = 500
	everydayRace      = 10 * time.Second
)

// tierOptions are the suite's options at the tier that runs: the everyday
// sizes, or at the deep tier (PRESENCE_DEEP=1) those of DefaultOptions, at
// least 2,000 sequences per target and a 30-second race run. Either way
// PRESENCE_CONFORMANCE_SCALE, when set, multiplies DefaultOptions instead.
func tierOptions() conformance.Options {
	o := conformance.DefaultOptions()
	if !testtier.Deep() && os.Getenv(conformance.EnvScale) == "" {
		o.Sequences, o.RaceDuration = everydaySequences, everydayRace
	}
	return o
}

func TestSequencesMiniredis(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.MiniredisTargets(), tierOptions())
}

func TestSequencesRedisServer(t *testing.T) {
	t.Parallel()
	srv := redistest.Server(t) // skips where redis-server is not installed
	conformance.Run(t, conformance.AdapterTargets(srv.Addr), tierOptions())
}

func TestRace(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the race run takes its full duration; skipped in -short mode")
	}
	srv := redistest.Server(t)
	conformance.RunRace(t, conformance.AdapterTargets(srv.Addr), tierOptions())
}
