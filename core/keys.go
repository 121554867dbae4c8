package core

import "strconv"

// KeyNames names the Redis keys an engine writes, for tools that inspect
// them (memory and encoding reports, debugging). It builds them from the
// engine's own layout (layout.go), so no copy of the layout lives elsewhere.
type KeyNames struct{ engine *Engine }

// Keys returns the names of e's keys.
func (e *Engine) Keys() KeyNames { return KeyNames{e} }

// UserBuckets is the number of user buckets.
func (k KeyNames) UserBuckets() int { return len(k.engine.settings.users) }

// UserBucket is the bucket of user.
func (k KeyNames) UserBucket(user string) int { return int(k.engine.settings.keys.userBucket(user)) }

// Page is page n of user bucket b: a hash of user → record. Which page
// holds a user depends on the bucket's meta, so tools list pages by this
// name's prefix rather than compute it.
func (k KeyNames) Page(b, n int) string {
	return k.engine.settings.users[b].pagePrefix + strconv.Itoa(n)
}

// Big is the hash of user bucket b that holds the records too long for a page.
func (k KeyNames) Big(b int) string { return k.engine.settings.users[b].keys[2] }

// Due is the due index of user bucket b.
func (k KeyNames) Due(b int) string { return k.engine.settings.users[b].keys[1] }

// Exact is the sorted set of sc, a scope of an exact-layout class.
func (k KeyNames) Exact(sc Scope) (string, error) {
	sk, err := k.scope(sc, LayoutExact)
	return sk.data, err
}

// Shard is compact shard n of sc, a scope of a compact-layout class: 0 to
// Shards-1 for a spread class; for a self-sized one, 0 to 65,535, of which
// the scope uses as many as its meta says (CompactMeta).
func (k KeyNames) Shard(sc Scope, n int) (string, error) {
	sk, err := k.scope(sc, LayoutCompact)
	if err != nil {
		return "", err
	}
	last := sk.cls.shards - 1
	if !sk.cls.spread {
		last = maxCompactShards - 1
	}
	if n < 0 || n > last {
		return "", invalid("shard", "%d is outside 0..%d", n, last)
	}
	return sk.shardKeyN(n), nil
}

// CompactMeta is the meta hash of sc, a scope of a compact class that does
// not spread: L (level), s (split pointer), t (members stored) and N →
// the size of shard N; its shards are 0 to 2^L + s - 1.
func (k KeyNames) CompactMeta(sc Scope) (string, error) {
	sk, err := k.selfSized(sc)
	return sk.compactMetaKey(), err
}

func (k KeyNames) selfSized(sc Scope) (scopeKeys, error) {
	sk, err := k.scope(sc, LayoutCompact)
	if err == nil && sk.cls.spread {
		err = invalid("scope.Class", "%q spreads its shards: no meta", sc.Class)
	}
	return sk, err
}

// Count is the count key of sc, which sweeps refresh and readers read.
func (k KeyNames) Count(sc Scope) (string, error) {
	sk, err := k.engine.plans.scopeKeys("scope", sc)
	return sk.count, err
}

// scope checks sc, and that its class has layout want.
func (k KeyNames) scope(sc Scope, want Layout) (scopeKeys, error) {
	sk, err := k.engine.plans.scopeKeys("scope", sc)
	if err != nil {
		return scopeKeys{}, err
	}
	if sk.cls.layout != want {
		return scopeKeys{}, invalid("scope.Class", "%q has layout %v, not %v", sc.Class, sk.cls.layout, want)
	}
	return sk, nil
}
