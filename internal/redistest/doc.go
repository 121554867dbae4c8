// Package redistest starts throwaway redis-server processes for tests: a
// single node with Server, or a Redis Cluster with Cluster and
// ClusterWithReplicas. Every process listens on a free 127.0.0.1 port of its
// own (never 6379), keeps its data in a temporary directory, saves nothing to
// disk, and is stopped by pid when the test ends (t.Cleanup).
//
// Where redis-server (or, for a cluster, redis-cli) is not on PATH the helpers
// skip the test, so suites that use them still pass on a machine without
// Redis; miniredis covers those.
//
// The environment variable PRESENCE_REDIS_BIN chooses the server instead: the
// absolute path of a directory that holds redis-server and redis-cli, such as
// a Redis 7.4 or Valkey 8 build. Where it is set the helpers take both
// binaries from that directory and never from PATH, and where the directory
// lacks one of them they skip the test with one line naming the variable and
// the missing path. .ci/lanes runs the real-server suites so, once a server:
//
//	PRESENCE_REDIS_BIN=/opt/valkey-8.0.1/bin go test ./adapters/... ./conformance/...
//
// The package is driver-free on purpose: it speaks just enough RESP over a
// net.Conn to wait for a node and to set a cluster up, so that it can test the
// adapters of every driver without depending on any of them. Import it as
//
//	import "github.com/presencekit/presence/internal/redistest"
//
// and use it from a test:
//
//	func TestAgainstRedis(t *testing.T) {
//		srv := redistest.Server(t)
//		client := redis.NewClient(&redis.Options{Addr: srv.Addr})
//		// …
//		srv.Kill() // the next command fails as a lost server would
//	}
package redistest
