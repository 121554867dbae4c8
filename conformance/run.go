package conformance

import (
	"context"
	"testing"
)

// Run checks every target with the model-based sequences, as parallel
// subtests of t named after the targets, and fails a subtest with the
// shrunk, readable failing sequence when its target disagrees with the
// model. It returns the reports, for tests that log or assert more. It
// takes a *testing.T rather than a testing.TB because it runs subtests.
func Run(t *testing.T, targets []Target, opts Options) []Report {
	t.Helper()
	opts = opts.withDefaults()
	reports := make([]Report, len(targets))
	t.Run("sequences", func(t *testing.T) {
		for i, tg := range targets {
			t.Run(tg.Name, func(t *testing.T) {
				t.Parallel()
				r := Check(context.Background(), tg, opts)
				reports[i] = r
				if r.Err != nil {
					t.Fatalf("%s", r.Summary())
				}
				t.Log(r.Summary())
				if r.Failure != "" {
					t.Errorf("%s\n%s", r.Summary(), r.Failure)
				}
			})
		}
	})
	return reports
}

// RunRace runs the race suite on targets (which share one server with
// wall-clock time) for opts.RaceDuration, and fails t with the operations
// involved when a property does not hold.
func RunRace(t testing.TB, targets []Target, opts Options) RaceReport {
	t.Helper()
	r := CheckRace(context.Background(), targets, opts)
	if r.Err != nil {
		t.Fatalf("%s", r.Summary())
	}
	t.Log(r.Summary())
	if r.Failure != "" {
		t.Errorf("%s\n%s", r.Summary(), r.Failure)
	}
	return r
}
