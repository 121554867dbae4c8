//go:build race

package host_test

// raceEnabled shortens the parity run: the race detector slows the
// embedded Redis tenfold, and the module's code is not what it watches.
const raceEnabled = true
