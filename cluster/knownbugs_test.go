package cluster

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	goredisadapter "github.com/presencekit/presence/adapters/goredis"
)

// TestKnownBugGoredisFailoverDefaultOptions: with a ClusterClient built
// with default options (only Addrs), heartbeats on a dead master's slots
// keep failing for about a minute after its replica took over.
//
// Input: a 3-master, 3-replica cluster (cluster-node-timeout 1000 ms);
// heartbeats through goredis.New(redis.NewClusterClient(&redis.ClusterOptions{
// Addrs: …})); SIGKILL of the master of a bucket in use.
// Expected: heartbeats on its slots succeed again within seconds of the
// replica's promotion (about 2 s after the kill), as with redigo and rueidis.
// Actual: promotion after about 2 s, first acknowledged heartbeat about 60 s
// after the kill; meanwhile every heartbeat of those slots fails with
// "connection refused" (retryable, so nothing is wrong but the delay).
// Cause: go-redis v9.23 reloads its slot map at once only after MOVED, ASK
// or READONLY replies. A refused dial marks the node failing but keeps it as
// the slot's master, and no command for those slots reaches a live node that
// could answer MOVED, so the map is reloaded only when it is older than
// ClusterOptions.ClusterStateReloadInterval (60 s by default).
// Fix (adapters/goredis): when a call of a *redis.ClusterClient fails with an
// error that matches core.ErrUnavailable, call ReloadState (at most once a
// second or so) so that the next call goes to the new master; until then,
// document ClusterStateReloadInterval (ClusterTargets uses 2 s, recovery
// ~4 s).
func TestKnownBugGoredisFailoverDefaultOptions(t *testing.T) {
	t.Skip("known bug: a default go-redis ClusterClient finds a promoted replica only after ClusterStateReloadInterval (60 s); see the comment")
	c := startCluster(t, 1)
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cc.Close() })
	r := runFailover(t, c, "goredis-default", goredisadapter.New(cc))
	t.Log(r)
	if r.recovery > 15*time.Second {
		t.Errorf("recovery took %v", r.recovery)
	}
}
