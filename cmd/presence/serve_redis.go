package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
	goredislib "github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/adapters/redigo"
	"github.com/presencekit/presence/adapters/rueidis"
)

// drivers are the --driver values of serve.
var drivers = []string{"goredis", "redigo", "rueidis"}

// openDriver connects serve to Redis through driver: the server at url, the
// cluster with the given seed nodes, or (neither) an embedded miniredis
// that keeps its state for the life of the process, with key expiry
// following the wall clock. observe, if set, receives the rueidis
// adapter's client-side cache hits and misses.
func openDriver(ctx context.Context, url string, clusterAddrs []string, driver string, observe func(hit bool)) (*backend, error) {
	if url != "" && len(clusterAddrs) > 0 {
		return nil, usageError{msg: "--redis and --redis-cluster exclude each other"}
	}
	var mr *miniredis.Miniredis
	desc := ""
	switch {
	case url != "":
		desc = "redis " + redactURL(url)
	case len(clusterAddrs) > 0:
		desc = "redis cluster " + strings.Join(clusterAddrs, ",")
	default:
		mr = miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, fmt.Errorf("starting embedded miniredis: %w", err)
		}
		mr.ClockTTL(true)
		url = "redis://" + mr.Addr()
		desc = "embedded miniredis at " + mr.Addr() + " (state kept for the life of this process only)"
	}
	be, err := dial(ctx, url, clusterAddrs, driver, mr != nil, observe)
	if err != nil {
		if mr != nil {
			mr.Close()
		}
		return nil, err
	}
	be.desc = desc + " via " + driver
	if mr != nil {
		be.mini = mr
		closeDriver := be.close
		be.close = func() { closeDriver(); mr.Close() }
	}
	return be, nil
}

// dial opens the driver's client, checks that Redis answers, and wraps it
// in the driver's adapter.
func dial(ctx context.Context, url string, clusterAddrs []string, driver string, embedded bool, observe func(hit bool)) (*backend, error) {
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	where := redisAddr(url)
	if len(clusterAddrs) > 0 {
		where = strings.Join(clusterAddrs, ",")
	}
	fail := func(err error) error { return reachError(where, err) }
	switch driver {
	case "goredis":
		var c goredislib.UniversalClient
		if len(clusterAddrs) > 0 {
			c = goredislib.NewClusterClient(&goredislib.ClusterOptions{Addrs: clusterAddrs})
		} else {
			opt, err := goredislib.ParseURL(url)
			if err != nil {
				return nil, usageError{msg: fmt.Sprintf("--redis %q: %v", redactURL(url), err)}
			}
			c = goredislib.NewClient(opt)
		}
		if err := c.Ping(pctx).Err(); err != nil {
			c.Close()
			return nil, fail(err)
		}
		return &backend{store: goredis.New(c), close: func() { c.Close() }}, nil
	case "redigo":
		opts := []redigoredis.DialOption{redigoredis.DialConnectTimeout(dialTimeout)}
		if len(clusterAddrs) > 0 {
			cl := &redisc.Cluster{StartupNodes: clusterAddrs, DialOptions: opts,
				CreatePool: func(addr string, o ...redigoredis.DialOption) (*redigoredis.Pool, error) {
					return &redigoredis.Pool{MaxIdle: 16, IdleTimeout: time.Minute,
						DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
							return redigoredis.DialContext(ctx, "tcp", addr, o...)
						}}, nil
				}}
			if err := cl.Refresh(); err != nil {
				cl.Close()
				// redisc joins its nodes' errors as text, a line each; a dial
				// of the first seed node recovers the network's reason.
				if conn, derr := net.DialTimeout("tcp", clusterAddrs[0], dialTimeout); derr != nil {
					return nil, fail(derr)
				} else {
					conn.Close()
				}
				return nil, fail(err)
			}
			return &backend{store: redigo.NewCluster(cl), close: func() { cl.Close() }}, nil
		}
		pool := &redigoredis.Pool{MaxIdle: 16, IdleTimeout: time.Minute,
			DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
				return redigoredis.DialURLContext(ctx, url, opts...)
			}}
		conn, err := pool.GetContext(pctx)
		if err == nil {
			_, err = redigoredis.DoContext(conn, pctx, "PING")
			conn.Close()
		}
		if err != nil {
			pool.Close()
			return nil, fail(err)
		}
		return &backend{store: redigo.New(pool), close: func() { pool.Close() }}, nil
	case "rueidis":
		var opt rueidislib.ClientOption
		if len(clusterAddrs) > 0 {
			opt.InitAddress = clusterAddrs
		} else {
			o, err := rueidislib.ParseURL(url)
			if err != nil {
				return nil, usageError{msg: fmt.Sprintf("--redis %q: %v", redactURL(url), err)}
			}
			opt = o
		}
		if embedded {
			// miniredis has no client tracking, and refuses commands on a
			// RESP3 connection that holds a subscription.
			opt.DisableCache, opt.ForceSingleClient, opt.AlwaysRESP2 = true, true, true
		}
		opt.Dialer.Timeout = dialTimeout
		c, err := rueidislib.NewClient(opt)
		if err != nil {
			return nil, fail(err)
		}
		if err := c.Do(pctx, c.B().Ping().Build()).Error(); err != nil {
			c.Close()
			return nil, fail(err)
		}
		var ropts []rueidis.Option
		if observe != nil {
			ropts = append(ropts, rueidis.WithCacheObserver(observe))
		}
		return &backend{store: rueidis.New(c, ropts...), close: c.Close}, nil
	}
	return nil, usageError{msg: fmt.Sprintf("--driver %q: want one of %s", driver, strings.Join(drivers, ", "))}
}

// redactURL hides a password in a redis:// URL.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return u
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}
