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
// one channel. The table shows beats per second, latencies, the server's
// CPU time per beat (INFO cpu of redis-server) and the client's (this
// process's CPU time, getrusage, and its heap allocations), each over the
// same measured interval; memory rows show Redis bytes per online device of
// each design (INFO memory deltas on fresh prefixes).
//
// --runs N measures each row N times in rounds, in alternating order, and
// reports medians, with each engine design's ratios to Centrifuge taken
// within a round; --designs and --only narrow the run, and --cpuprofile
// DIR writes a pprof CPU profile of each row. Issue 32's client CPU run:
//
//	go run . --redis URL --designs engine/goredis,centrifuge --only beat --runs 5 [--concurrency 128]
package main
