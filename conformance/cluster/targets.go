package cluster

import (
	"context"
	"fmt"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	goredisadapter "github.com/presencekit/presence/adapters/goredis"
	redigoadapter "github.com/presencekit/presence/adapters/redigo"
	rueidisadapter "github.com/presencekit/presence/adapters/rueidis"
	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/core"
)

// Timeouts of the cluster clients the targets build. A dial to a dead node
// fails fast (connection refused on loopback), so the dial timeout matters
// only for a node that hangs; the read timeout bounds a call whose node died
// mid-reply.
const (
	dialTimeout = 5 * time.Second
	readTimeout = 5 * time.Second
)

// ClusterTargets returns one conformance target per adapter on the Redis
// Cluster whose nodes are addrs ("host:port"; any subset of the nodes will
// do, every driver learns the rest from CLUSTER SLOTS):
//
//   - "goredis/cluster": a *redis.ClusterClient (go-redis v9) under
//     goredis.New, which splits each pipeline per node; its slot map is
//     reloaded every 2 s (ClusterStateReloadInterval, 60 s by default), so
//     that it finds a promoted replica soon after a failover;
//   - "redigo/cluster": a *redisc.Cluster (github.com/mna/redisc) with a
//     redigo pool per node, refreshed once, under redigo.NewCluster;
//   - "rueidis/cluster": a rueidis client with InitAddress set to addrs,
//     which detects the cluster itself, with client-side caching on, under
//     rueidis.New.
//
// The server keeps wall-clock time, so the backends have no SetTime and no
// Reset: every sequence writes under a key prefix of its own.
func ClusterTargets(addrs []string) []conformance.Target {
	addrs = append([]string(nil), addrs...)
	open := func(dial func([]string) (core.Store, func() error, error)) func(context.Context) (*conformance.Backend, error) {
		return func(ctx context.Context) (*conformance.Backend, error) {
			store, closeClient, err := dial(addrs)
			if err != nil {
				return nil, err
			}
			return &conformance.Backend{Store: store, Close: closeClient}, nil
		}
	}
	return []conformance.Target{
		{Name: "goredis/cluster", Adapter: "goredis", Open: open(dialGoredis)},
		{Name: "redigo/cluster", Adapter: "redigo", Open: open(dialRedigo)},
		{Name: "rueidis/cluster", Adapter: "rueidis", Open: open(dialRueidis)},
	}
}

// goredisReload is how often the go-redis cluster client reloads the slot
// map. go-redis reloads it at once after a MOVED reply, but not when a
// master's connections are refused: after a failover it keeps dialing the
// dead master until this interval has passed (60 s by default).
const goredisReload = 2 * time.Second

// dialGoredis returns a go-redis cluster client's Store and its Close.
func dialGoredis(addrs []string) (core.Store, func() error, error) {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                      addrs,
		DialTimeout:                dialTimeout,
		ReadTimeout:                readTimeout,
		ClusterStateReloadInterval: goredisReload,
	})
	return goredisadapter.New(c), c.Close, nil
}

// dialRedigo returns a redisc cluster's Store and its Close. The slot map is
// loaded once here; redisc refreshes it on its own after a MOVED reply.
func dialRedigo(addrs []string) (core.Store, func() error, error) {
	c := &redisc.Cluster{
		StartupNodes: addrs,
		DialOptions: []redigo.DialOption{
			redigo.DialConnectTimeout(dialTimeout),
			redigo.DialReadTimeout(readTimeout),
			redigo.DialWriteTimeout(readTimeout),
		},
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
	if err := c.Refresh(); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("cluster: redisc: loading the slot map from %v: %w", addrs, err)
	}
	return redigoadapter.NewCluster(c), c.Close, nil
}

// dialRueidis returns a rueidis cluster client's Store, with client-side
// caching on, and its Close.
func dialRueidis(addrs []string) (core.Store, func() error, error) {
	opt := rueidis.ClientOption{InitAddress: addrs}
	opt.Dialer.Timeout = dialTimeout
	opt.ConnWriteTimeout = readTimeout
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: rueidis: %w", err)
	}
	return rueidisadapter.New(c), func() error { c.Close(); return nil }, nil
}
