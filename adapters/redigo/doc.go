// Package redigo adapts github.com/gomodule/redigo (RESP2) to core.Store, for
// a single server through a *redis.Pool and for Redis Cluster through a
// *redisc.Cluster (github.com/mna/redisc).
//
// New pipelines a batch on one pooled connection: every EVALSHA or EVAL is
// sent, the buffer flushed once, and the replies read back in order, so a
// batch costs one round trip. NewCluster runs the calls of a batch one after
// the other, each on a connection bound to the node that serves its keys and
// following MOVED and ASK redirections (redisc.RetryConn): a batch costs one
// round trip per call. Both Stores implement core.Publisher,
// core.BatchPublisher (New: one pipeline; NewCluster: a message at a time)
// and core.Subscriber.
//
// The package is named like its driver, so import it under an alias when the
// driver is imported too:
//
//	import (
//		"github.com/gomodule/redigo/redis"
//		redigoadapter "github.com/presencekit/presence/adapters/redigo"
//	)
//
//	pool := &redis.Pool{
//		DialContext: func(ctx context.Context) (redis.Conn, error) {
//			return redis.DialContext(ctx, "tcp", "127.0.0.1:6379")
//		},
//		MaxIdle: 8,
//	}
//	store := redigoadapter.New(pool)
//	results := store.Eval(ctx, []core.Call{{Source: "return 1"}})
//
// Deadlines: the pool Store reads replies with redis.ReceiveContext, so ctx
// bounds every batch (the pool's Dial must return redigo's own connections,
// which support contexts). redisc connections take no context, so the cluster
// Store turns ctx's deadline into a read timeout for a call's first attempt
// and otherwise relies on the DialReadTimeout given in Cluster.DialOptions.
package redigo
