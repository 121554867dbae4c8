// Package rueidis adapts github.com/redis/rueidis to core.Store, for a single
// server or a Redis Cluster alike: rueidis routes each command by its keys
// and pipelines on its own.
//
// Eval sends every call of a batch with one DoMulti. The Store also
// implements core.CachedReader, reading keys through rueidis' client-side
// cache (RESP3 CLIENT TRACKING: the server tells the client when a cached key
// changes), and core.Publisher, core.BatchPublisher (one DoMulti) and
// core.Subscriber. FenceCache gives the
// Store's own writes read-your-writes through that cache: the server's
// invalidation of a key a script rewrote may arrive after the script's
// reply, and the fence waits for it (see fence.go).
//
// The package is named like its driver, so import it under an alias:
//
//	import (
//		"github.com/redis/rueidis"
//		rueidisadapter "github.com/presencekit/presence/adapters/rueidis"
//	)
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	if err != nil {
//		return err
//	}
//	store := rueidisadapter.New(client, rueidisadapter.WithCacheTTL(time.Minute))
//	results := store.Eval(ctx, []core.Call{{Source: "return 1"}})
//	count, err := store.CachedGet(ctx, "P:{s7}:n:room:lobby")
//
// A client built with DisableCache (as a server without CLIENT TRACKING,
// such as miniredis, requires) still works: CachedGet then reads with a plain
// GET and counts every read as a miss.
package rueidis
