package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestKeyNamesAreTheKeysWritten checks that KeyNames names exactly the
// keys an engine writes for a user and for a scope of each layout: the
// tools that inspect Redis read the engine's layout, not a copy of it.
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
	k := e.Keys()
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
	if k.UserBuckets() != 16 {
		t.Errorf("UserBuckets %d, want the default 16", k.UserBuckets())
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
	exact, err := k.Exact(room)
	if err != nil || !written()[exact] {
		t.Errorf("Exact(room) = %q, %v; keys: %v", exact, err, mr.Keys())
	}
	for _, sc := range []core.Scope{hall, wide} {
		found := 0
		for n := range 4 {
			key, err := k.Shard(sc, n)
			if err != nil {
				t.Fatal(err)
			}
			if written()[key] {
				found++
			}
		}
		if found != 1 {
			t.Errorf("%v: %d of its shard names written, want the one holding m1; keys: %v", sc, found, mr.Keys())
		}
		if sc == hall {
			// a self-sized scope's meta and due index
			for _, f := range []func(core.Scope) (string, error){k.CompactMeta, k.CompactIndex} {
				if key, err := f(sc); err != nil || !written()[key] {
					t.Errorf("%v: meta or index %q, %v not written; keys: %v", sc, key, err, mr.Keys())
				}
			}
		}
		count, err := k.Count(sc)
		if err != nil || !written()[count] {
			t.Errorf("Count(%v) = %q, %v; keys: %v", sc, count, err, mr.Keys())
		}
	}

	for name, err := range map[string]error{
		"exact of a compact scope": errOf(k.Exact(hall)),
		"shard of an exact scope":  errOf(k.Shard(room, 0)),
		"shard out of range":       errOf(k.Shard(wide, 4)),
		"self-sized out of range":  errOf(k.Shard(hall, 65536)),
		"meta of a spread scope":   errOf(k.CompactMeta(wide)),
		"unknown class":            errOf(k.Count(core.Scope{Class: "nope", ID: "x"})),
	} {
		if !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func errOf(_ string, err error) error { return err }
