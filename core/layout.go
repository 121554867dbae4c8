package core

import (
	"crypto/sha1"

	"github.com/presencekit/presence/internal/keyspace"
	"github.com/presencekit/presence/internal/slot"
)

// The key layout (version 2 of the user keys, lua/recordlib.lua; version 2
// of the scope keys) is written in internal/keyspace, whose doc lists every
// key: the engine builds each name it sends through it.

// keyLayout is the engine's key layout: keyspace.Layout, which writes
// every name, with the buckets as the planner counts them.
type keyLayout struct {
	prefix       string
	userBuckets  uint32
	scopeBuckets uint32
}

// space is l as keyspace names it.
func (l keyLayout) space() keyspace.Layout {
	return keyspace.Layout{Prefix: l.prefix, UserBuckets: int(l.userBuckets), ScopeBuckets: int(l.scopeBuckets)}
}

// bucketOf returns the bucket of id (keyspace.Bucket).
func bucketOf(id string, n uint32) uint32 { return uint32(fnv64(id) % uint64(n)) }

func fnv64(s string) uint64 { return keyspace.FNV64(s) }

func (l keyLayout) userBase(bucket uint32) string { return l.space().UserBase(int(bucket)) }

func (l keyLayout) scopeBase(bucket uint32) string { return l.space().ScopeBase(int(bucket)) }

// spreadBase is the base of shard n of a spread compact scope in bucket b:
// its own hash tag, so that shards land on different slots.
func (l keyLayout) spreadBase(bucket uint32, n int) string {
	return l.space().SpreadBase(int(bucket), n)
}

func (l keyLayout) userBucket(user string) uint32 { return bucketOf(user, l.userBuckets) }

func (l keyLayout) scopeBucket(s Scope) uint32 { return bucketOf(s.ref(), l.scopeBuckets) }

// Suffixes of per-user keys and of per-bucket keys (keyspace's); scripts
// build per-user keys from the bucket base and these, as the engine
// passes them.
const (
	sufMeta     = keyspace.SufMeta
	sufPage     = keyspace.SufPage
	sufBig      = keyspace.SufBig
	sufManual   = keyspace.SufManual
	sufDue      = keyspace.SufDue
	sufCounts   = keyspace.SufCounts
	sufOutbox   = keyspace.SufOutbox
	sufLock     = keyspace.SufLock
	sufExact    = keyspace.SufExact
	sufShard    = keyspace.SufShard
	sufCompact  = keyspace.SufCompact
	sufHLL      = keyspace.SufHLL
	sufCount    = keyspace.SufCount
	sufRegistry = keyspace.SufRegistry
	sufRelease  = keyspace.SufRelease
)

// The meta hash and due index of a self-sized compact scope are its
// shards' prefix, these, and its tail (keyspace.MetaKey, IndexKey).
const (
	compactMeta  = keyspace.CompactMeta
	compactIndex = keyspace.CompactIndex
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

func (l keyLayout) logKey() string { return l.space().Log() }

// sameSlot returns an error matching ErrCrossSlot unless every key maps to
// one Redis Cluster hash slot (slot.Check, which the adapters run too).
func sameSlot(keys []string) error { return slot.Check(keys) }
