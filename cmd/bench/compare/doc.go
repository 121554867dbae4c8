// Command compare measures, in one process against one fresh redis-server,
// the presence engine through each adapter beside github.com/centrifugal/
// centrifuge's Redis presence manager (AddPresence, PresenceStats) and the
// two plain designs that presence tutorials commonly show: ZADD+SETEX+HSET per
// beat, and one HSET per beat into 16 sharded hashes.
//
// It lives in its own module so that the library's go.mod never requires
// Centrifuge. Run it from this directory:
//
//	go run . --redis redis://127.0.0.1:PORT [--brief] [--json out.json]
//
// Every design is given the same users, device IDs (36-byte UUID-shaped
// client IDs, as Centrifuge issues), concurrency and duration. User
// presence maps onto Centrifuge as one personal channel per user
// ("user:ID") with the device as the client; a room of members maps onto
// one channel. The table shows beats per second, latencies and the
// server's CPU time per beat; memory rows show Redis bytes per online
// device of each design (INFO memory deltas on fresh prefixes).
package main
