//go:build race

package core_test

// raceEnabled: the race detector's sync.Pool drops a share of what it is
// given, so that allocation counts are not the program's.
const raceEnabled = true
