package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

// TestKeyNamesAreTheKeysWritten checks that internal/keyspace names exactly
// the keys an engine writes for a user and for a scope of each layout: the
// tools that inspect Redis name them with the engine's layout, from the
// Config they gave it (keyspace.New), not with a copy of it.
func TestKeyNamesAreTheKeysWritten(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := &manualClock{t: t0}
	mr.SetTime(clk.t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	w := 10 * time.Minute
	e, err := core.New(goredis.New(c), core.Config{Prefix: "kn", Clock: clk.Now, Classes: map[string]core.ScopeClass{
		"room": {Layout: core.LayoutExact, Window: w},
		"hall": {Layout: core.LayoutCompact, Window: w, Shards: 4},
		"wide": {Layout: core.LayoutCompact, Window: w, Shards: 4, Spread: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := keyspace.New("kn", 0, 0)
	if k != core.Keys(e) {
		t.Fatalf("keyspace.New(%q, 0, 0) = %+v, the engine's layout %+v", "kn", k, core.Keys(e))
	}
	written := func() map[string]bool {
		out := map[string]bool{}
		for _, key := range mr.Keys() {
			out[key] = true
		}
		return out
	}

	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Active: true}); err != nil {
		t.Fatal(err)
	}
	b := k.UserBucket("alice")
	for _, key := range []string{k.Meta(b), k.Page(b, 0), k.Due(b)} {
		if !written()[key] {
			t.Errorf("user key %q not written; keys: %v", key, mr.Keys())
		}
	}
	if k.UserBuckets != 16 {
		t.Errorf("UserBuckets %d, want the default 16", k.UserBuckets)
	}

	room, hall, wide := core.Scope{Class: "room", ID: "r1"}, core.Scope{Class: "hall", ID: "h1"}, core.Scope{Class: "wide", ID: "w1"}
	for _, sc := range []core.Scope{room, hall, wide} {
		if err := e.Touch(ctx, sc, "m1"); err != nil {
			t.Fatal(err)
		}
		clk.advance(mr, 6*time.Second) // the scope's first sweep is due: it writes the count key
		if _, err := e.SweepScopes(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Count(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	if exact := k.Exact(room.Class, room.ID); !written()[exact] {
		t.Errorf("Exact(room) = %q; keys: %v", exact, mr.Keys())
	}
	for _, sc := range []core.Scope{hall, wide} {
		shard := k.Shard
		if sc == wide {
			shard = k.SpreadShard
		}
		found := 0
		for n := range 4 {
			if written()[shard(sc.Class, sc.ID, n)] {
				found++
			}
		}
		if found != 1 {
			t.Errorf("%v: %d of its shard names written, want the one holding m1; keys: %v", sc, found, mr.Keys())
		}
		if sc == hall {
			// a self-sized scope's meta and due index
			for _, key := range []string{k.CompactMeta(sc.Class, sc.ID), k.CompactIndex(sc.Class, sc.ID)} {
				if !written()[key] {
					t.Errorf("%v: meta or index %q not written; keys: %v", sc, key, mr.Keys())
				}
			}
		}
		if count := k.Count(sc.Class, sc.ID); !written()[count] {
			t.Errorf("Count(%v) = %q; keys: %v", sc, count, mr.Keys())
		}
	}

	// Each name is of its own scope and kind: a wrong kind names no key.
	for name, key := range map[string]string{
		"exact of a compact scope":   k.Exact(hall.Class, hall.ID),
		"self-sized shard of spread": k.Shard(wide.Class, wide.ID, 0),
		"spread shard of self-sized": k.SpreadShard(hall.Class, hall.ID, 0),
		"meta of a spread scope":     k.CompactMeta(wide.Class, wide.ID),
		"count of an unknown class":  k.Count("nope", "x"),
	} {
		if written()[key] {
			t.Errorf("%s: %q is a key the engine wrote", name, key)
		}
	}
}
