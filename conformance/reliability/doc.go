// Package reliability holds the failure and load tests of issue 9: every
// fault is injected into a real redis-server (started by
// internal/redistest on a loopback port) under each adapter (goredis,
// redigo, rueidis), and each test states the guarantee it checks:
//
//   - Redis killed with SIGKILL in the middle of a heartbeat run and
//     restarted empty (outage_test.go);
//   - connections reset, stalled, black-holed or losing a reply after the
//     server applied a script, through faultproxy (network_test.go);
//   - SCRIPT FLUSH while calls, pipelines and batched heartbeats run
//     (noscript_test.go);
//   - maxmemory reached under noeviction (oom_test.go);
//   - two sweepers racing, one stalled past its lock's lease
//     (sweeplock_test.go);
//   - clock steps of the engine's clock and hosts skewed from the server
//     (clock_test.go);
//   - a soak at the highest rate the machine sustains (soak_test.go): no
//     errors, no goroutine leaks, memory stable, p99 reported;
//   - one test per common production pitfall of presence systems
//     (pitfalls_test.go).
//
// The package has no code of its own: the helpers live in faultproxy and
// internal/rig. The soak runs for 10 s per adapter by default; set
// PRESENCE_SOAK=2m (or pass -soak=2m) for a longer one. Every wait is
// bounded; timings are logged as figures, never asserted.
//
//	go test -race ./reliability/...
//	PRESENCE_SOAK=5m go test -run Soak -v ./reliability/
//
// README.md beside this file holds the "Failure behaviour" section, each
// guarantee with the test that shows it.
package reliability
