package core

// Bounded calls ("no stall for others"): Redis runs one script call, and a
// pipeline of them, without serving any other client, so the operations
// that take many items split them into calls of about callMicros of server
// time each, and send them in round trips of at most roundMicros
// (round.costs), whatever the batch. The costs are estimates, rounded up
// from the benchmarks (docs/performance.md, "No stall for others"): they
// decide only how calls are grouped, never what a call does, so an
// estimate that is off makes round trips longer or shorter, not wrong.

// callMicros is the server time one call of a split operation is sized for.
const callMicros = 500

// Estimated server costs, in µs, of one item of a call.
const (
	statusMicros  = 10 // a user's status (status.lua)
	touchMicros   = 10 // a touch (touch.lua, shard_touch.lua)
	steadyMicros  = 8  // a steady beat (heartbeat_steady.lua)
	fullMicros    = 25 // a beat on the full path (heartbeat_full.lua)
	hlenMicros    = 1  // a compact shard a count sums (count.lua)
	ackMicros     = 1  // an outbox entry acknowledged (outbox_ack.lua)
	publishMicros = 3  // a message published (outbox_ack.lua)
	logMicros     = 2  // an event appended to the change log (log_append.lua)
)

// Items per call of the split operations: callMicros of each.
const (
	statusChunk = callMicros / statusMicros
	touchChunk  = callMicros / touchMicros
	steadyChunk = callMicros / steadyMicros
	fullChunk   = callMicros / fullMicros
	// the beats a steady beat call decides itself of those it cannot
	// apply (lua/heartbeat_steady.lua): a quarter of a call on the full
	// path, so that a call of left beats runs over by that at most
	leftChunk = callMicros / 4 / fullMicros
	logChunk  = callMicros / logMicros
)

// spans splits [0, count) into the fewest spans of at most n, of sizes as
// even as can be (62 in two of 31, not 50 and 12), so that more calls
// share a round trip.
func spans(count, n int) [][2]int {
	out := make([][2]int, spanCount(count, n))
	for i := range out {
		out[i][0], out[i][1] = span(count, len(out), i)
	}
	return out
}

// spanCount is the number of spans that spans splits [0, count) into.
func spanCount(count, n int) int { return (count + n - 1) / n }

// span is the i-th of the k spans that spans splits [0, count) into, for
// a caller that keeps its own room.
func span(count, k, i int) (lo, hi int) { return i * count / k, (i + 1) * count / k }
