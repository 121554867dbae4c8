// Package keyspace names what an engine keeps in Redis, its keys and its
// channels, for this module's service, tools and tests (memory reports,
// the outbox gauge, tests that read or break keys). Users of the library
// need none of it, so package core registers its implementation here when
// it is initialised rather than exporting it.
//
//	keys := keyspace.Of(eng) // eng is a *core.Engine
//	for b := range keys.UserBuckets() {
//		_ = keys.Outbox(b)
//	}
package keyspace

// Names names the Redis keys and channels of one engine. It builds them
// from the engine's own layout (core/layout.go), so no copy of the layout
// lives elsewhere. A scope is given as its class and ID (core.Scope's
// fields); a scope of an unknown class, or of a class of another layout
// than the key asks for, is refused with an error matching core.ErrInvalid.
type Names interface {
	// UserBuckets is the number of user buckets.
	UserBuckets() int
	// UserBucket is the bucket of user.
	UserBucket(user string) int
	// Page is page n of user bucket b: a hash of user → record. Which page
	// holds a user depends on the bucket's meta, so tools list pages by
	// this name's prefix rather than compute it.
	Page(b, n int) string
	// Big is the hash of user bucket b that holds the records too long for
	// a page.
	Big(b int) string
	// Due is the due index of user bucket b.
	Due(b int) string
	// Outbox is the outbox hash of user bucket b (0 ≤ b < UserBuckets):
	// the events its scripts decided and the engine has not yet
	// acknowledged as delivered (docs/design.md §7). Besides one field per
	// waiting event it holds two bookkeeping fields, "#" (the bucket's
	// event counter) and "@" (the instant that counter started), so a
	// bucket's waiting events are its HLEN less 2 (a missing key: none).
	Outbox(b int) string
	// Exact is the sorted set of a scope of an exact-layout class.
	Exact(class, id string) (string, error)
	// Shard is compact shard n of a scope of a compact-layout class: 0 to
	// Shards-1 for a spread class; for a self-sized one, 0 to 65,535, of
	// which the scope uses as many as its meta says (CompactMeta).
	Shard(class, id string, n int) (string, error)
	// CompactMeta is the meta hash of a scope of a compact class that does
	// not spread: L (level), s (split pointer), t (members stored) and N →
	// the size of shard N; its shards are 0 to 2^L + s - 1.
	CompactMeta(class, id string) (string, error)
	// Count is the count key of a scope, which sweeps refresh and readers
	// read.
	Count(class, id string) (string, error)
	// ChangeChannel is the channel status changes are published on.
	ChangeChannel() string
	// KickChannel is the channel kicks for gateway are published on.
	KickChannel(gateway string) string
}

// of is package core's implementation of Of, set once when core is
// initialised (Register) and read-only from then on.
var of func(engine any) Names

// Register is for package core alone: it sets the implementation of Of.
func Register(f func(engine any) Names) { of = f }

// Of returns the names of the keys and channels of engine, a *core.Engine.
// It panics for anything else.
func Of(engine any) Names { return of(engine) }
