package cluster

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	goredisadapter "github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// TestGoredisFailoverDefaultOptions checks that with a ClusterClient built
// with default options (only Addrs), heartbeats on a dead master's slots
// succeed again within seconds of its replica's promotion, as with redigo
// and rueidis.
//
// Input: a 3-master, 3-replica cluster (cluster-node-timeout 1000 ms);
// heartbeats through goredis.New(redis.NewClusterClient(&redis.ClusterOptions{
// Addrs: …})); SIGKILL of the master of a bucket in use.
// Expected: heartbeats on its slots succeed again within seconds of the
// replica's promotion (about 2 s after the kill).
// Why it needs the adapter: go-redis v9.23 reloads its slot map at once
// only after MOVED, ASK or READONLY replies. A refused dial marks the node
// failing but keeps it as the slot's master, and no command for those
// slots reaches a live node that could answer MOVED, so on its own the
// client reloads the map only when it is older than
// ClusterOptions.ClusterStateReloadInterval (60 s by default): a minute of
// "connection refused" (retryable, but a minute). adapters/goredis calls
// ReloadState, at most once a second, when a call of a *redis.ClusterClient
// fails with an error that matches core.ErrUnavailable (reloadSlots).
func TestGoredisFailoverDefaultOptions(t *testing.T) {
	c := startCluster(t, 1, failoverNodeTimeout)
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cc.Close() })
	r := runFailover(t, c, "goredis-default", goredisadapter.New(cc))
	t.Log(r)
	if r.recovery > 15*time.Second {
		t.Errorf("recovery took %v", r.recovery)
	}
}

// TestSpreadTouchSparesBucketMaster: in spread mode a hot scope's
// writes leave its bucket's master: the scope is registered there (ZADD NX)
// once per batch, and each shard's touches are one script call.
//
// Input: one TouchBatch of 1,000 distinct members into one scope of a
// compact class with 256 shards and Spread: true, on a 3-master cluster.
// Expected: the bucket's master registers the scope once per batch (one
// ZADD), and the shard writes go out as at most one call per shard (≤ 256
// calls, ~4 members each), so that the hottest master's share of the work
// drops to about a third.
// Why it matters: spreading exists to take a hot scope's writes off its
// bucket's master. A registration (ZADD NX) and a shard_touch call for
// every touch would leave that master as busy as without spreading, and
// make spread-mode throughput a fraction of together mode's, so
// Engine.TouchBatch registers each distinct scope once per batch and
// groups the shard writes by shard key into one shard_touch call each.
func TestSpreadTouchSparesBucketMaster(t *testing.T) {
	c := startCluster(t, 0, 0)
	tg := ClusterTargets(c.Addrs())[0]
	be, err := tg.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	var log batchLog
	eng, err := core.New(log.wrap(be.Store), core.Config{
		Prefix: "known-spread",
		Classes: map[string]core.ScopeClass{
			"video": {Layout: core.LayoutCompact, Window: 10 * time.Minute, Shards: 256, Spread: true},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	touch := func(id string) {
		ts := make([]core.ScopeTouch, core.MaxBatch)
		for i := range ts {
			ts[i] = core.ScopeTouch{Scope: core.Scope{Class: "video", ID: id}, Member: "m" + strconv.Itoa(i)}
		}
		if err := eng.TouchBatch(context.Background(), ts); err != nil {
			t.Fatal(err)
		}
	}
	touch("warm-up") // scripts loaded everywhere
	resetStats(t, c)
	log.take()
	touch("hot")
	calls := 0
	for _, b := range log.take() {
		calls += len(b)
	}
	zadds := masterCalls(t, c, "zadd")
	var most int64
	for _, n := range zadds {
		most = max(most, n)
	}
	if most > 10 {
		t.Errorf("one batch of 1,000 touches into one spread scope ran %d ZADD on the bucket's master (per master: %v), want about 1", most, zadds)
	}
	// 256 shard calls and one bucket call, and at most one EVAL per master
	// for a script that master had not run yet (the NOSCRIPT fallback).
	if calls > 256+1+3 {
		t.Errorf("one batch of 1,000 touches into a 256-shard spread scope sent %d script calls, want at most 260", calls)
	}
}

// TestNoReplicasIsRetryable: a master configured to refuse writes
// while too few replicas are in sync (min-replicas-to-write, the Redis
// setting that bounds what a failover can lose) refuses scripts with
// NOREPLICAS, and the engine reports that as retryable.
//
// Input: a heartbeat through goredis.New on a redis-server started with
// --min-replicas-to-write 1 and no replica (as a master whose replica just
// died or lags past min-replicas-max-lag).
// Expected: an error that matches core.ErrUnavailable:
// the script wrote nothing (Redis refuses at its first write), and the
// condition passes once a replica catches up, like MASTERDOWN or
// CLUSTERDOWN.
// The reply is "NOREPLICAS Not enough good replicas to write. script: …";
// core.ClassifyError lists it among the passing conditions (LOADING, BUSY,
// MASTERDOWN, TRYAGAIN, CLUSTERDOWN, READONLY, OOM, NOREPLICAS).
func TestNoReplicasIsRetryable(t *testing.T) {
	srv := redistest.Server(t, "--min-replicas-to-write", "1")
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	eng, err := core.New(goredisadapter.New(client), core.Config{Prefix: "known-noreplicas"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Heartbeat(context.Background(), core.Heartbeat{User: "u", Device: "d"})
	if err == nil {
		t.Fatal("a heartbeat without replicas in sync succeeded")
	}
	if !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("NOREPLICAS refusal is not retryable: %v", err)
	}
}
