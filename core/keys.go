package core

import (
	"strconv"

	"github.com/presencekit/presence/internal/keyspace"
)

// keyNames names the Redis keys and channels of an engine for this
// module's service, tools and tests, through package keyspace (whose
// Names documents each method): users of the library need none of them.
type keyNames struct{ engine *Engine }

// init hands package keyspace the engine's names, the one way into them.
func init() {
	keyspace.Register(func(e any) keyspace.Names { return keyNames{e.(*Engine)} })
}

func (k keyNames) ChangeChannel() string { return k.engine.plans.changeChannel() }

func (k keyNames) KickChannel(gateway string) string { return k.engine.plans.kickChannel(gateway) }

func (k keyNames) UserBuckets() int { return len(k.engine.settings.users) }

func (k keyNames) UserBucket(user string) int { return int(k.engine.settings.keys.userBucket(user)) }

func (k keyNames) Page(b, n int) string {
	return k.engine.settings.users[b].pagePrefix + strconv.Itoa(n)
}

func (k keyNames) Big(b int) string { return k.engine.settings.users[b].keys[2] }

func (k keyNames) Due(b int) string { return k.engine.settings.users[b].keys[1] }

func (k keyNames) Exact(class, id string) (string, error) {
	sc := Scope{class, id}
	sk, err := k.scope(sc, LayoutExact)
	return sk.data, err
}

func (k keyNames) Shard(class, id string, n int) (string, error) {
	sc := Scope{class, id}
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

func (k keyNames) CompactMeta(class, id string) (string, error) {
	sc := Scope{class, id}
	sk, err := k.selfSized(sc)
	return sk.compactMetaKey(), err
}

func (k keyNames) selfSized(sc Scope) (scopeKeys, error) {
	sk, err := k.scope(sc, LayoutCompact)
	if err == nil && sk.cls.spread {
		err = invalid("scope.Class", "%q spreads its shards: no meta", sc.Class)
	}
	return sk, err
}

func (k keyNames) Count(class, id string) (string, error) {
	sc := Scope{class, id}
	sk, err := k.engine.plans.scopeKeys("scope", sc)
	return sk.count, err
}

// scope checks sc, and that its class has layout want.
func (k keyNames) scope(sc Scope, want Layout) (scopeKeys, error) {
	sk, err := k.engine.plans.scopeKeys("scope", sc)
	if err != nil {
		return scopeKeys{}, err
	}
	if sk.cls.layout != want {
		return scopeKeys{}, invalid("scope.Class", "%q has layout %v, not %v", sc.Class, sk.cls.layout, want)
	}
	return sk, nil
}
