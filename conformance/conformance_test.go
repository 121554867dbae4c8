package conformance_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/testtier"
)

// Sizes of the tiers. The teeth tests plant their bugs at the everyday
// sizes, so that the everyday suite (the README's test command) is known to
// catch each of them; the deep tier (PRESENCE_DEEP=1) doubles the sequences
// and triples the race run. Under the race detector, which multiplies a
// sequence's CPU several times over and looks for data races rather than
// rare rule mistakes, the deep tier runs deepRaceSequences instead.
const (
	everydaySequences = 500
	everydayRace      = 10 * time.Second
	deepSequences     = 1000
	deepRaceSequences = 600
	deepRace          = 30 * time.Second
)

// tierOptions are the suite's options at the tier that runs, multiplied by
// PRESENCE_CONFORMANCE_SCALE when it is set (to a positive number), with
// the seed of PRESENCE_CONFORMANCE_SEED.
func tierOptions() conformance.Options {
	o := conformance.DefaultOptions()
	o.Sequences = testtier.Pick(everydaySequences, deepSequences)
	if raceEnabled && testtier.Deep() {
		o.Sequences = deepRaceSequences
	}
	o.RaceDuration = testtier.Pick(everydayRace, deepRace)
	if s, err := strconv.ParseFloat(os.Getenv(conformance.EnvScale), 64); err == nil && s > 0 {
		o.Sequences = max(1, int(float64(o.Sequences)*s))
		o.RaceDuration = time.Duration(float64(o.RaceDuration) * s)
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
