// Package cluster runs the presence engine on Redis Cluster: ClusterTargets
// lists a conformance target per adapter on a cluster, and the package's
// tests hold the engine to the same semantics on a real 3-master cluster as
// on one server, through every driver.
//
// # Why the same scripts run on a cluster
//
// Every key one script touches carries the same hash tag, the number of a
// bucket: P:{u7}:… for user bucket 7, P:{s3}:… for scope bucket 3, so a
// script's keys always share a slot. Config.UserBuckets and
// Config.ScopeBuckets (16 each by default) set how many slots the engine
// uses, and so how evenly its load spreads over the masters; a sweep pass
// makes one script call per bucket, pipelined, so it reaches every master
// in one round and never scans the keyspace. A compact scope class with
// ScopeClass.Spread gives each shard a slot of its own (P:{s3.N}:…), so the
// members of one very hot scope spread over the masters; its counts and
// sweeps then read every shard in one pipelined batch.
//
// # Drivers
//
// go-redis: wrap a *redis.ClusterClient with goredis.New. Set
// ClusterOptions.ClusterStateReloadInterval to a few seconds: go-redis
// reloads its slot map at once after a MOVED reply, but while a dead
// master refuses connections no MOVED comes back, so with the default
// (60 s) calls on its slots fail for up to a minute after its replica took
// over.
//
//	client := redis.NewClusterClient(&redis.ClusterOptions{
//		Addrs:                      []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
//		ClusterStateReloadInterval: 2 * time.Second,
//	})
//	eng, err := core.New(goredisadapter.New(client), core.Config{})
//
// rueidis: rueidis.NewClient with InitAddress set to some or all nodes
// detects the cluster itself; wrap it with rueidis.New. Client-side caching
// works on a cluster as on one server: hot counts are served from the
// client's cache and invalidated by the node that holds them.
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
//	eng, err := core.New(rueidisadapter.New(client), core.Config{})
//
// redigo: build a *redisc.Cluster (github.com/mna/redisc) with CreatePool,
// load its slot map with Refresh, and wrap it with redigo.NewCluster. redisc
// follows MOVED and ASK and refreshes its map after a MOVED. This Store runs
// the calls of a batch one after the other, one round trip each: batches,
// and the counts and sweeps of spread scopes, cost more round trips than
// through the other two drivers.
//
//	cl := &redisc.Cluster{StartupNodes: addrs, CreatePool: newPool}
//	if err := cl.Refresh(); err != nil { … }
//	eng, err := core.New(redigoadapter.NewCluster(cl), core.Config{})
//
// # Failover
//
// When a master dies, its replica takes over once the other masters have
// marked it failed (cluster-node-timeout) and elected the replica. Until
// then calls on its slots fail, and with cluster-require-full-coverage yes
// (the default) every master answers CLUSTERDOWN for a second or so: every
// such error matches core.ErrUnavailable, so callers retry.
// Replication is asynchronous: writes the master acknowledged in the last
// moments before it died, not yet on its replica, are lost, and each user
// or scope of the dead master's slots is rolled back to a consistent
// earlier state (a script's writes replicate together). Devices come back
// with their next heartbeat. The tests measure all of this; see
// docs/cluster.md for the figures.
//
// # Tests
//
// The tests start their own clusters on free loopback ports with
// internal/redistest and skip where redis-server is not installed. Their
// sizes suit CI; PRESENCE_CLUSTER_SCALE=10 multiplies them, and
// PRESENCE_CLUSTER_BENCH=1 runs the throughput measurement at full size:
//
//	PRESENCE_CLUSTER_BENCH=1 go test ./cluster -run TestThroughput -v
package cluster
