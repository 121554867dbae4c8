package core

import (
	"crypto/sha1"
	"strconv"

	"github.com/presencekit/presence/internal/slot"
)

// Layout of keys (version 2 of the user keys: lua/recordlib.lua; version 2
// of the scope keys: self-sized compact scopes under "c:", where version 1
// kept a class's fixed number of shards under "h:", which spread classes
// still do). Every key
// is the prefix, a hash tag, and a suffix:
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

type keyLayout struct {
	prefix       string
	userBuckets  uint32
	scopeBuckets uint32
}

// bucketOf returns the bucket of id: FNV-1a, stable across processes,
// platforms and versions (a change would move every key).
func bucketOf(id string, n uint32) uint32 { return uint32(fnv64(id) % uint64(n)) }

func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func (l keyLayout) userBase(bucket uint32) string {
	return l.prefix + ":{u" + strconv.FormatUint(uint64(bucket), 10) + "}:"
}

func (l keyLayout) scopeBase(bucket uint32) string {
	return l.prefix + ":{s" + strconv.FormatUint(uint64(bucket), 10) + "}:"
}

// spreadBase is the base of shard n of a spread compact scope in bucket b:
// its own hash tag, so that shards land on different slots.
func (l keyLayout) spreadBase(bucket uint32, n int) string {
	return l.prefix + ":{s" + strconv.FormatUint(uint64(bucket), 10) + "." + strconv.Itoa(n) + "}:"
}

func (l keyLayout) userBucket(user string) uint32 { return bucketOf(user, l.userBuckets) }

func (l keyLayout) scopeBucket(s Scope) uint32 { return bucketOf(s.ref(), l.scopeBuckets) }

// Suffixes of per-user keys and of per-bucket keys; scripts build per-user
// keys from the bucket base and these, so the layout lives here only.
const (
	sufMeta     = "m"
	sufPage     = "p:"
	sufBig      = "big"
	sufManual   = "man"
	sufDue      = "due"
	sufCounts   = "cnt"
	sufOutbox   = "ob"
	sufLock     = "lock"
	sufExact    = "z:"
	sufShard    = "h:"
	sufCompact  = "c:"
	sufHLL      = "x:"
	sufCount    = "n:"
	sufRegistry = "reg"
	sufRelease  = "rel"
)

// The meta hash and due index of a self-sized compact scope are its shards'
// prefix, these, and its tail (scopelib.lua builds them so): shard numbers
// are digits, so neither is a shard.
const (
	compactMeta  = "m"
	compactIndex = "i"
)

// maxCompactShards bounds a self-sized scope's shards, as scopelib.lua's
// MAX_SHARDS.
const maxCompactShards = 65536

// memberHash places a member among a self-sized compact scope's shards by
// linear hashing: the first 32 bits of SHA1(member), big-endian, as
// scopelib.lua's memberHash (TestMemberHashVectors holds the two together).
func memberHash(member string) uint32 {
	sum := sha1.Sum([]byte(member))
	return uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3])
}

// linearShard is the shard of a member of hash h at level lv with split
// pointer sp, as scopelib.lua's shardOf.
func linearShard(h uint32, lv, sp int) int {
	n := int(uint64(h) % (uint64(1) << lv))
	if n < sp {
		n = int(uint64(h) % (uint64(1) << (lv + 1)))
	}
	return n
}

func (l keyLayout) logKey() string { return l.prefix + ":log" }

// sameSlot returns an error matching ErrCrossSlot unless every key maps to
// one Redis Cluster hash slot (slot.Check, which the adapters run too).
func sameSlot(keys []string) error { return slot.Check(keys) }
