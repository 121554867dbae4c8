package core

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/presencekit/presence/internal/keyspace"
)

// scopeKeys are the keys and arguments that locate one scope's data.
type scopeKeys struct {
	layout keyLayout
	scope  Scope
	cls    classSettings
	bucket uint32
	data   string // exact: the sorted set; compact, approx: up to the shard or bucket start
	tail   string // compact, approx: what follows the shard or bucket start
	count  string
}

func (p *planner) scopeKeys(field string, sc Scope) (scopeKeys, error) {
	cls, err := p.settings.checkScope(field, sc)
	if err != nil {
		return scopeKeys{}, err
	}
	l := p.settings.keys
	b := l.scopeBucket(sc)
	base := l.scopeBase(b)
	k := scopeKeys{layout: l, scope: sc, cls: cls, bucket: b, count: keyspace.CountKey(base, sc.Class, sc.ID)}
	switch cls.layout {
	case LayoutExact:
		k.data = keyspace.ExactKey(base, sc.Class, sc.ID)
	case LayoutCompact:
		k.data, k.tail = keyspace.CompactHead(base, sc.Class), keyspace.Tail(sc.ID)
		if cls.spread {
			k.data = keyspace.SpreadHead(base, sc.Class)
		}
	case LayoutApprox:
		k.data, k.tail = keyspace.HLLHead(base, sc.Class), keyspace.Tail(sc.ID)
	}
	return k, nil
}

// shardPrefix is the key of compact shard n up to the shard number.
func (k scopeKeys) shardPrefix(n int) string {
	if k.cls.spread {
		return keyspace.SpreadHead(k.layout.spreadBase(k.bucket, n), k.scope.Class)
	}
	return k.data
}

// shardKeyN is the key of compact shard n.
func (k scopeKeys) shardKeyN(n int) string { return keyspace.ShardKey(k.shardPrefix(n), n, k.tail) }

// shardKey is the spread compact shard holding member: stable hash mod
// shards.
func (k scopeKeys) shardKey(member string) string {
	return k.shardKeyN(k.shardIndex(member))
}

// shardIndex is the shard of member in a spread scope: a stable hash, so
// that the same member always lands in the same shard.
func (k scopeKeys) shardIndex(member string) int {
	return int(fnv64(member) % uint64(k.cls.shards))
}

// compactMetaKey and compactIndexKey are a self-sized compact scope's meta
// hash and due index (scopelib.lua).
func (k scopeKeys) compactMetaKey() string  { return keyspace.MetaKey(k.data, k.tail) }
func (k scopeKeys) compactIndexKey() string { return keyspace.IndexKey(k.data, k.tail) }

// scopeBucketKeys are the registry, release counters and lock of bucket b.
func (p *planner) scopeBucketKeys(b uint32) []string {
	registry, release, lock := p.settings.keys.space().BucketKeys(int(b))
	return []string{registry, release, lock}
}

// readCount runs a ReadCount: the scope's member count: live for exact and approx scopes;
// for compact scopes, the count the last sweep wrote, read through the
// store's client-side cache when it has one. When Redis cannot be reached
// it returns the last good count marked Stale, or the error if it has none.
func (e *Engine) readCount(ctx context.Context, sc Scope) (Count, error) {
	k, err := e.plans.scopeKeys("scope", sc)
	if err != nil {
		return Count{}, err
	}
	c, err := e.count(ctx, k)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			if last, ok := e.lastGoodCount(sc); ok {
				last.Stale = true
				return last, nil
			}
		}
		return Count{}, err
	}
	e.rememberCount(sc, c)
	return c, nil
}

// count reads a compact scope's count through the client-side cache when
// the store has one, else drives the count plan.
func (e *Engine) count(ctx context.Context, k scopeKeys) (Count, error) {
	if k.cls.layout == LayoutCompact && e.cache != nil {
		v, err := e.cache.CachedGet(ctx, k.count)
		if err != nil {
			return Count{}, &StoreError{Op: "count", Unavailable: errors.Is(err, ErrUnavailable), Err: err}
		}
		if v.Kind != ValueNil {
			s, err := v.asString()
			if err != nil {
				return Count{}, err
			}
			return parseCount(s)
		}
	}
	p := e.plans.countOf(e.nowArg(), k)
	e.drive(ctx, p)
	return p.Outcome()
}

// decodeCount reads a reply whose items from index i are count, asOf; a
// count of -1 (a peek that found no count key) is allowed only when peek.
func decodeCount(v Value, i int, peek bool) (Count, error) {
	items, err := v.asArray(i + 2)
	if err != nil {
		return Count{}, err
	}
	n, err1 := items[i].asInt()
	asOf, err2 := items[i+1].asInt()
	if err1 != nil || err2 != nil || n < -1 || n > maxReplyCount || (n == -1 && !peek) || asOf < 0 {
		return Count{}, replyErr("count: %s", v)
	}
	return Count{N: n, AsOf: msTime(asOf)}, nil
}

// parseCount reads a count key's "count:asOf".
func parseCount(s string) (Count, error) {
	n, asOf, ok := strings.Cut(s, ":")
	c, err1 := strconv.ParseInt(n, 10, 64)
	t, err2 := strconv.ParseInt(asOf, 10, 64)
	if !ok || err1 != nil || err2 != nil || c < 0 || c > maxReplyCount || t < 0 {
		return Count{}, replyErr("count key %q", s)
	}
	return Count{N: c, AsOf: msTime(t)}, nil
}

func (e *Engine) rememberCount(sc Scope, c Count) {
	if e.lastGood == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.lastGood[sc]; !ok && len(e.lastGood) >= e.settings.lastGood {
		for k := range e.lastGood { // evict an arbitrary entry to stay bounded
			delete(e.lastGood, k)
			break
		}
	}
	e.lastGood[sc] = c
}

func (e *Engine) lastGoodCount(sc Scope) (Count, bool) {
	if e.lastGood == nil {
		return Count{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.lastGood[sc]
	return c, ok
}

// decodeMembers appends a members.lua page to page and returns its next cursor.
func decodeMembers(v Value, page *MemberPage) (shard, offset int, err error) {
	_, rest, err := splitReply(v, 3)
	if err != nil {
		return 0, 0, err
	}
	nextShard, err1 := rest[0].asInt()
	nextOffset, err2 := rest[1].asInt()
	flat, err3 := rest[2].asArray(-1)
	done := nextShard == -1 && nextOffset == -1
	valid := done || (nextShard >= 0 && nextShard <= 65536 && nextOffset >= 0 && nextOffset <= 1<<30)
	if err1 != nil || err2 != nil || err3 != nil || len(flat)%2 != 0 || !valid {
		return 0, 0, replyErr("members: %s", v)
	}
	for i := 0; i < len(flat); i += 2 {
		id, err1 := flat[i].asString()
		seen, err2 := flat[i+1].asInt()
		if err1 != nil || err2 != nil {
			return 0, 0, replyErr("members: %s", v)
		}
		page.Members = append(page.Members, Member{ID: id, LastSeen: msTime(seen)})
	}
	return int(nextShard), int(nextOffset), nil
}

// checkPage checks a page request and reads its cursor.
func checkPage(cursor string, limit int) (shard, offset int, err error) {
	if limit < 1 || limit > MaxPage {
		return 0, 0, invalid("limit", "must be 1 to %d, got %d", MaxPage, limit)
	}
	return parseCursor(cursor)
}

func formatCursor(shard, offset int) string {
	return strconv.Itoa(shard) + "." + strconv.Itoa(offset)
}

func parseCursor(c string) (shard, offset int, err error) {
	if c == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(c, ".")
	shard, err1 := strconv.Atoi(a)
	offset, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || shard < 0 || offset < 0 || shard > 65536 || offset > 1<<30 {
		return 0, 0, invalid("cursor", "%q is not a cursor this engine returned", c)
	}
	return shard, offset, nil
}
