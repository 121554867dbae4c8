package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	goredisadapter "github.com/presencekit/presence/adapters/goredis"
	redigoadapter "github.com/presencekit/presence/adapters/redigo"
	rueidisadapter "github.com/presencekit/presence/adapters/rueidis"
	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/conformance/cluster"
	"github.com/presencekit/presence/core"
)

// The examples need a running cluster, so they compile but do not run; the
// package's tests run the same setups on clusters they start themselves.

// addrs are some nodes of your cluster; each driver learns the rest.
var addrs = []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}

// hotVideos is a configuration with a compact class whose shards spread over
// the cluster's slots, for scopes too hot for one master.
var hotVideos = core.Config{
	Classes: map[string]core.ScopeClass{
		"room":  {Layout: core.LayoutExact},
		"video": {Layout: core.LayoutCompact, Window: 10 * time.Minute, SweepInterval: time.Minute},
		"live":  {Layout: core.LayoutCompact, Window: 10 * time.Minute, SweepInterval: time.Minute, Spread: true},
	},
}

// Example_goredis: a go-redis ClusterClient, with a slot map reloaded every
// 2 s so that calls find a promoted replica soon after a failover.
func Example_goredis() {
	client := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                      addrs,
		ClusterStateReloadInterval: 2 * time.Second,
	})
	defer client.Close()
	eng, err := core.New(goredisadapter.New(client), hotVideos)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_, err = eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "phone", Kind: core.KindIOS, Active: true})
	switch {
	case err == nil:
	case errors.Is(err, core.ErrUnavailable):
		// A failover or a lost connection: sending the heartbeat again
		// shortly is safe.
	default:
		panic(err)
	}
}

// Example_rueidis: rueidis detects the cluster from any of its nodes, and
// caches hot counts on the client.
func Example_rueidis() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	eng, err := core.New(rueidisadapter.New(client), hotVideos)
	if err != nil {
		panic(err)
	}
	n, err := eng.Count(context.Background(), core.Scope{Class: "live", ID: "final"})
	if err != nil {
		panic(err)
	}
	fmt.Println(n.N, "watching")
}

// Example_redigo: redigo through redisc, with a pool per node.
func Example_redigo() {
	cl := &redisc.Cluster{
		StartupNodes: addrs,
		DialOptions:  []redigo.DialOption{redigo.DialConnectTimeout(5 * time.Second), redigo.DialReadTimeout(5 * time.Second)},
		CreatePool: func(addr string, opts ...redigo.DialOption) (*redigo.Pool, error) {
			return &redigo.Pool{
				DialContext: func(ctx context.Context) (redigo.Conn, error) {
					return redigo.DialContext(ctx, "tcp", addr, opts...)
				},
				MaxIdle:     16,
				IdleTimeout: time.Minute,
			}, nil
		},
	}
	defer cl.Close()
	if err := cl.Refresh(); err != nil { // load the slot map
		panic(err)
	}
	eng, err := core.New(redigoadapter.NewCluster(cl), hotVideos)
	if err != nil {
		panic(err)
	}
	if err := eng.Touch(context.Background(), core.Scope{Class: "room", ID: "888"}, "alice"); err != nil {
		panic(err)
	}
}

// ExampleClusterTargets runs the conformance suite on your cluster through
// every adapter, from a test.
func ExampleClusterTargets() {
	var t *testing.T // the test's
	// Leave Options.Cleanup off: its SCAN runs inside a keyless script, on
	// one node only. Use a cluster you can throw away.
	conformance.Run(t, cluster.ClusterTargets(addrs), conformance.DefaultOptions())
}
