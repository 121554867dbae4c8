// Package goredis adapts github.com/redis/go-redis/v9 to core.Store.
//
// New wraps any redis.UniversalClient: a *redis.Client for one server, a
// *redis.ClusterClient for Redis Cluster (go-redis splits each pipeline per
// node and follows MOVED and ASK itself), or a *redis.Ring or failover client.
// Eval sends every call of a batch in one pipeline, so a batch costs one round
// trip per node. The Store also implements core.Publisher,
// core.BatchPublisher (a pipeline per node) and core.Subscriber.
//
// The package is named like its driver's module path, so import it under an
// alias when the driver is imported too:
//
//	import (
//		"github.com/redis/go-redis/v9"
//		goredisadapter "github.com/presencekit/presence/adapters/goredis"
//	)
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	store := goredisadapter.New(client)
//	results := store.Eval(ctx, []core.Call{{Source: "return 1"}})
//
// go-redis retries a pipeline that failed on the network (Options.MaxRetries,
// 3 by default), which re-sends scripts the server may already have run; set
// MaxRetries to -1 where that matters.
package goredis
