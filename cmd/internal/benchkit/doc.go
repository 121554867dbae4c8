// Package benchkit measures the presence engine against a real Redis: the
// workloads behind "presence bench" and the comparison module in
// cmd/bench/compare.
//
// It has three layers, each usable alone:
//
//   - Run drives one operation at a fixed concurrency for a bounded time and
//     op count, and reports throughput with latency percentiles taken from a
//     log-linear histogram (Hist) that never allocates on the hot path.
//   - Admin reads what the server says about itself: INFO memory and
//     commandstats deltas, SLOWLOG, OBJECT ENCODING, and a PING probe that
//     samples the server's responsiveness while a workload runs.
//   - Suite runs the engine's workloads (heartbeats single and batched,
//     status reads, scope touches and counts in each layout, memory per
//     device and per scope member, sweeps of an expired backlog, and the
//     rueidis client-side cache) through each adapter, and returns a Report
//     that prints as a table (Report.WriteTable) and encodes as JSON (the
//     schema is documented on Report).
//
// Embedded miniredis is not a fair target (it is single-goroutine Go, has
// no listpack encodings, no SLOWLOG and no real memory accounting), so the
// command refuses it unless told otherwise; the workloads themselves only
// need a core.Store.
//
// A minimal use, against a throwaway redis-server:
//
//	s := benchkit.Suite{URL: "redis://127.0.0.1:23456", Brief: true}
//	rep, err := s.Run(ctx)
//	if err != nil { ... }
//	rep.WriteTable(os.Stdout)
package benchkit
