// Package storetest holds the checks every core.Store adapter must pass, so
// that the go-redis, redigo and rueidis adapters are held to one contract
// against miniredis and against real servers from redistest: exact reply
// mapping, NOSCRIPT and Lua errors, per-call failures inside a batch,
// cross-slot refusal, unreachable servers, pub/sub and cluster routing.
//
// An adapter's test builds a Store against a backend and hands it over:
//
//	import "github.com/presencekit/presence/internal/storetest"
//
//	func TestMiniredis(t *testing.T) {
//		m := miniredis.RunT(t)
//		storetest.Run(t, goredis.New(redis.NewClient(&redis.Options{Addr: m.Addr()})))
//	}
package storetest
