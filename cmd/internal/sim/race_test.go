//go:build race

package sim_test

// raceEnabled shortens the simulations: the race detector slows the
// embedded Redis tenfold.
const raceEnabled = true
