// Package keyspace names the Redis keys of presence: the one place their
// layout is written (docs/design.md's key table follows it). Package
// core builds every key it sends from it; the tools and tests that inspect
// Redis (the service's outbox gauge, memory reports, the suites) name the
// same keys with it, from the Config they gave the engine, so that no copy
// of the layout lives elsewhere. It is plain code over strings: no state,
// nothing registered.
//
// The layout: version 2 of the user keys (lua/recordlib.lua); version 2
// of the scope keys, self-sized compact scopes under "c:", where version 1
// kept a class's fixed number of shards under "h:", which spread classes
// still do. Every key is the prefix, a hash tag, and a suffix:
//
//	P:{uB}:m                hash   layout version, page level and split pointer of user bucket B
//	P:{uB}:p:N              hash   user → record (devices, fences, published status, pending
//	                               change) of page N, in listpack encoding; expires Config's
//	                               longest window or fence, plus KeyGrace, after its last write
//	P:{uB}:big              hash   user → record, for records too long for a page
//	P:{uB}:man              hash   user → manual status and its expiry
//	P:{uB}:due              zset   page or big-hash user → next instant it needs a sweep (or earlier)
//	P:{uB}:cnt              hash   published status → number of users of the bucket in it
//	P:{uB}:ob               hash   the bucket's outbox: events decided, not yet delivered
//	P:{uB}:lock             string sweep lock of bucket B
//	P:{sB}:z:CLASS:SCOPE    zset   member → last touch (exact layout)
//	P:{sB}:c:CLASS:N:SCOPE  hash   member → last touch, shard N of a self-sized compact scope
//	P:{sB}:c:CLASS:m:SCOPE  hash   its level L, split pointer s, members stored t, N → shard N's size
//	P:{sB}:c:CLASS:i:SCOPE  zset   its due index: shard N → earliest instant a window passes (or earlier)
//	P:{sB.N}:h:CLASS:N:SCOPE hash  member → last touch, shard N of a spread compact scope
//	P:{sB}:x:CLASS:T:SCOPE  hll    members touched in the bucket starting at T (approx layout)
//	P:{sB}:n:CLASS:SCOPE    string "count:asOf", refreshed by each sweep
//	P:{sB}:reg              zset   CLASS:SCOPE → next sweep of the scope
//	P:{sB}:rel              hash   CLASS:SCOPE → consecutive empty sweeps
//	P:{sB}:lock             string sweep lock of bucket B
//	P:log                   stream the change log (Config.ChangeLog)
//
// The user or scope ID is always the last part of a key and IDs never hold
// control characters, so the mapping is injective whatever else the IDs hold;
// the tag holds only the bucket number, so every key of one bucket (and so of
// one script call) shares one cluster slot. Class names are checked to hold
// no ':'; the prefix is checked to hold no braces.
package keyspace

import "strconv"

// Defaults of core.Config.Prefix and of core.Config.UserBuckets and
// ScopeBuckets.
const (
	DefaultPrefix  = "presence"
	DefaultBuckets = 16
)

// Suffixes of the keys of a user bucket, after its base (UserBase). The
// scripts build keys from the base and these, as the engine passes them.
const (
	SufMeta     = "m"    // hash: layout version, page level and split pointer
	SufPage     = "p:"   // hashes p:N: user → record, page N
	SufBig      = "big"  // hash: user → record, for records too long for a page
	SufManual   = "man"  // hash: user → manual status and its expiry
	SufDue      = "due"  // zset: page or big-hash user → next instant it needs a sweep
	SufCounts   = "cnt"  // hash: published status → users of the bucket in it
	SufOutbox   = "ob"   // hash: the bucket's events decided and not yet delivered
	SufLock     = "lock" // string: the bucket's sweep lock (scope buckets too)
	SufExact    = "z:"   // zset z:CLASS:SCOPE: member → last touch (exact layout)
	SufShard    = "h:"   // hash h:CLASS:N:SCOPE: shard N of a spread compact scope
	SufCompact  = "c:"   // hashes c:CLASS:N:SCOPE, c:CLASS:m:SCOPE, c:CLASS:i:SCOPE: a self-sized compact scope
	SufHLL      = "x:"   // HyperLogLog x:CLASS:T:SCOPE: members touched in the bucket starting at T
	SufCount    = "n:"   // string n:CLASS:SCOPE: "count:asOf", refreshed by each sweep
	SufRegistry = "reg"  // zset: CLASS:SCOPE → next sweep of the scope
	SufRelease  = "rel"  // hash: CLASS:SCOPE → consecutive empty sweeps
)

// A self-sized compact scope's meta hash and due index are its shards'
// head, these, and its tail (scopelib.lua builds them so): shard numbers
// are digits, so neither is a shard.
const (
	CompactMeta  = "m"
	CompactIndex = "i"
)

// Layout is the key layout of one deployment: the prefix and the bucket
// counts, as an engine's Config resolves them (New).
type Layout struct {
	Prefix       string
	UserBuckets  int
	ScopeBuckets int
}

// New returns the layout of an engine whose Config has these Prefix,
// UserBuckets and ScopeBuckets: their zero values mean the defaults, as
// core.New applies them.
func New(prefix string, userBuckets, scopeBuckets int) Layout {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if userBuckets == 0 {
		userBuckets = DefaultBuckets
	}
	if scopeBuckets == 0 {
		scopeBuckets = DefaultBuckets
	}
	return Layout{Prefix: prefix, UserBuckets: userBuckets, ScopeBuckets: scopeBuckets}
}

// Bucket returns the bucket of id among n: FNV-1a, stable across
// processes, platforms and versions (a change would move every key).
func Bucket(id string, n int) int { return int(FNV64(id) % uint64(n)) }

// FNV64 is the 64-bit FNV-1a hash of s, which places users and scopes in
// buckets and members in the shards of a spread scope.
func FNV64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Ref is a scope's name inside its bucket: class names hold no ':', so
// "class:id" is injective.
func Ref(class, id string) string { return class + ":" + id }

// UserBucket is the user bucket of user.
func (l Layout) UserBucket(user string) int { return Bucket(user, l.UserBuckets) }

// ScopeBucket is the scope bucket of the scope class:id.
func (l Layout) ScopeBucket(class, id string) int { return Bucket(Ref(class, id), l.ScopeBuckets) }

// UserBase is the start of every key of user bucket b: "P:{uB}:".
func (l Layout) UserBase(b int) string { return l.Prefix + ":{u" + strconv.Itoa(b) + "}:" }

// ScopeBase is the start of every key of scope bucket b: "P:{sB}:".
func (l Layout) ScopeBase(b int) string { return l.Prefix + ":{s" + strconv.Itoa(b) + "}:" }

// SpreadBase is the start of shard n of a spread compact scope of bucket
// b: a hash tag of its own, so that the shards land on different slots.
func (l Layout) SpreadBase(b, n int) string {
	return l.Prefix + ":{s" + strconv.Itoa(b) + "." + strconv.Itoa(n) + "}:"
}

// Meta is the meta hash of user bucket b: its layout version and its
// pages' level and split pointer (lua/recordlib.lua).
func (l Layout) Meta(b int) string { return l.UserBase(b) + SufMeta }

// PagePrefix is the name of user bucket b's pages up to the page number.
func (l Layout) PagePrefix(b int) string { return l.UserBase(b) + SufPage }

// Page is page n of user bucket b: a hash of user → record. Which page
// holds a user depends on the bucket's meta, so tools list pages by
// PagePrefix rather than compute it.
func (l Layout) Page(b, n int) string { return l.PagePrefix(b) + strconv.Itoa(n) }

// Big is the hash of user bucket b that holds the records too long for a page.
func (l Layout) Big(b int) string { return l.UserBase(b) + SufBig }

// Manual is the hash of user bucket b's manual statuses.
func (l Layout) Manual(b int) string { return l.UserBase(b) + SufManual }

// Due is the due index of user bucket b.
func (l Layout) Due(b int) string { return l.UserBase(b) + SufDue }

// Counts is the hash of user bucket b's users by published status.
func (l Layout) Counts(b int) string { return l.UserBase(b) + SufCounts }

// Outbox is the outbox hash of user bucket b: the events its scripts
// decided and the engine has not yet acknowledged as delivered
// (docs/design.md §7). Besides one field per waiting event it holds two
// bookkeeping fields, "#" (the bucket's event counter) and "@" (the
// instant that counter started), so a bucket's waiting events are its
// HLEN less 2 (a missing key: none).
func (l Layout) Outbox(b int) string { return l.UserBase(b) + SufOutbox }

// Lock is the sweep lock of user bucket b.
func (l Layout) Lock(b int) string { return l.UserBase(b) + SufLock }

// BucketKeys are scope bucket b's registry of active scopes, its hash of
// consecutive empty sweeps by scope, and its sweep lock.
func (l Layout) BucketKeys(b int) (registry, release, lock string) {
	base := l.ScopeBase(b)
	return base + SufRegistry, base + SufRelease, base + SufLock
}

// Log is the change log's stream.
func (l Layout) Log() string { return l.Prefix + ":log" }

// Exact is the sorted set of the scope class:id of an exact-layout class.
func (l Layout) Exact(class, id string) string {
	return ExactKey(l.ScopeBase(l.ScopeBucket(class, id)), class, id)
}

// Count is the count key of the scope class:id, which sweeps refresh and
// readers read.
func (l Layout) Count(class, id string) string {
	return CountKey(l.ScopeBase(l.ScopeBucket(class, id)), class, id)
}

// Shard is shard n (0 to 65,535, of which the scope uses as many as its
// meta says) of the scope class:id of a self-sized compact class.
func (l Layout) Shard(class, id string, n int) string {
	return ShardKey(CompactHead(l.ScopeBase(l.ScopeBucket(class, id)), class), n, Tail(id))
}

// SpreadShard is shard n (0 to Shards-1) of the scope class:id of a
// spread compact class.
func (l Layout) SpreadShard(class, id string, n int) string {
	return ShardKey(SpreadHead(l.SpreadBase(l.ScopeBucket(class, id), n), class), n, Tail(id))
}

// CompactMeta is the meta hash of the scope class:id of a self-sized
// compact class: L (level), s (split pointer), t (members stored) and N →
// the size of shard N; its shards are 0 to 2^L + s - 1.
func (l Layout) CompactMeta(class, id string) string {
	return MetaKey(CompactHead(l.ScopeBase(l.ScopeBucket(class, id)), class), Tail(id))
}

// CompactIndex is the due index of the scope class:id of a self-sized
// compact class: shard N → the earliest instant a window passes there.
func (l Layout) CompactIndex(class, id string) string {
	return IndexKey(CompactHead(l.ScopeBase(l.ScopeBucket(class, id)), class), Tail(id))
}

// The parts of a scope's keys, from its bucket's base (ScopeBase), as the
// engine builds them once per operation and the scripts join them.

// ExactKey is an exact scope's sorted set.
func ExactKey(base, class, id string) string { return base + SufExact + class + ":" + id }

// CountKey is a scope's count key.
func CountKey(base, class, id string) string { return base + SufCount + class + ":" + id }

// CompactHead is the part of a self-sized compact scope's shard keys
// before the shard number, of every scope of class in the bucket.
func CompactHead(base, class string) string { return base + SufCompact + class + ":" }

// SpreadHead is the part of a spread compact scope's shard keys before the
// shard number, from the bucket's base, or, for shard N itself, from its
// SpreadBase.
func SpreadHead(base, class string) string { return base + SufShard + class + ":" }

// HLLHead is the part of an approx scope's HyperLogLog keys before the
// bucket's start.
func HLLHead(base, class string) string { return base + SufHLL + class + ":" }

// Tail is what follows the shard number (or the HyperLogLog bucket) in a
// scope's keys.
func Tail(id string) string { return ":" + id }

// ShardKey is shard n of a compact scope, from its head and tail.
func ShardKey(head string, n int, tail string) string { return head + strconv.Itoa(n) + tail }

// MetaKey is a self-sized compact scope's meta hash, from its head and tail.
func MetaKey(head, tail string) string { return head + CompactMeta + tail }

// IndexKey is a self-sized compact scope's due index, from its head and tail.
func IndexKey(head, tail string) string { return head + CompactIndex + tail }
