package conformance

import (
	"context"
	"os"
)

// noCtx is the context of replays of the in-memory model.
var noCtx = context.Background()

// EnvKnownBugs, set to 1, makes the suite generate the inputs that trigger
// the core bugs listed in knownBugs, instead of steering around them until
// they are fixed.
const EnvKnownBugs = "PRESENCE_CONFORMANCE_KNOWN_BUGS"

// Known core bugs the suite found, by name; each has a skipped test in
// knownbugs_test.go that describes it.
const (
	// bugSpreadAsOf: Count of a spread compact scope without a count key
	// reports (and stores) as-of 0 instead of now.
	bugSpreadAsOf = "spread-count-asof"
	// bugModelRefusalPrunes: the Model prunes a user's expired records on a
	// refused or empty request, and so forgets when the user went offline
	// (reported by the fuzz suite: fuzz.TestKnownBugModelRefusalPrunes).
	// The suite's oracle replays the model without such requests, and
	// heartbeat batches carry tokens (so that dropping a refused beat does
	// not shift the tokens the batch hands out).
	bugModelRefusalPrunes = "model-refusal-prunes"
)

// avoid reports whether the generator should steer around the known bug.
func avoid(bug string) bool { return os.Getenv(EnvKnownBugs) != "1" }
