package conformance

import (
	"context"
	"testing"
)

// Run checks every target as a parallel subtest of t named after it, and
// fails the subtest with the shrunk, readable failing sequence when the
// target disagrees with the model.
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
