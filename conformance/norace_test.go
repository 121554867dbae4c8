//go:build !race

package conformance_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
