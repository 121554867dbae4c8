package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestLayoutRefusesOtherVersions points an engine at user keys of another
// layout: a bucket whose meta names another version, and a bucket of the
// first layout (a due index and counts without meta). Every user operation
// there fails with ErrLayout and changes nothing; a bucket of this layout
// beside them works.
func TestLayoutRefusesOtherVersions(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
		t.Cleanup(func() { c.Close() })
		checkLayoutRefused(t, c)
	})
	t.Run("redis-server", func(t *testing.T) {
		_, c := realClient(t)
		checkLayoutRefused(t, c)
	})
}

func checkLayoutRefused(t *testing.T, c *redis.Client) {
	ctx := context.Background()
	clk := &manualClock{t: t0}
	e, err := core.New(goredis.New(c), core.Config{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	k := core.Keys(e)
	users := map[string]func(b int){
		"future": func(b int) { c.HSet(ctx, k.Meta(b), "v", "3", "L", "0", "s", "0") },
		"first": func(b int) {
			c.ZAdd(ctx, k.Due(b), redis.Z{Score: 1, Member: "first"})
			c.HSet(ctx, "presence:{u"+strconv.Itoa(b)+"}:st", "first", "3\x1f\x1f0\x1f0\x1f0\x1f1")
		},
	}
	buckets := map[int]bool{}
	for user, plant := range users {
		b := k.UserBucket(user)
		if buckets[b] {
			t.Fatalf("test users share bucket %d", b)
		}
		buckets[b] = true
		plant(b)
	}
	var ok string
	for _, u := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if !buckets[k.UserBucket(u)] {
			ok = u
			break
		}
	}
	for user := range users {
		before := snapshot(ctx, t, c)
		ops := map[string]error{}
		_, ops["heartbeat"] = e.Heartbeat(ctx, core.Heartbeat{User: user, Device: "web", Kind: core.KindWeb})
		_, ops["login"] = e.Login(ctx, core.Login{User: user, Device: "web", Kind: core.KindWeb})
		_, ops["status"] = e.Status(ctx, user)
		_, ops["manual"] = e.SetManual(ctx, user, core.ManualDND, 0)
		_, ops["disconnect"] = e.Disconnect(ctx, user, "web", "")
		for op, err := range ops {
			if !errors.Is(err, core.ErrLayout) {
				t.Errorf("%s of %q: %v, want ErrLayout", op, user, err)
			}
		}
		if after := snapshot(ctx, t, c); after != before {
			t.Errorf("refused operations of %q changed the keys:\n%s\nthen\n%s", user, before, after)
		}
	}
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: ok, Device: "web", Kind: core.KindWeb}); err != nil {
		t.Errorf("a bucket of this layout: %v", err)
	}
	if _, err := e.SweepUsers(ctx); !errors.Is(err, core.ErrLayout) {
		t.Errorf("a sweep over the first layout's due index: %v, want ErrLayout", err)
	}
}

// snapshot renders every key and its value, sorted, to compare states.
func snapshot(ctx context.Context, t *testing.T, c *redis.Client) string {
	t.Helper()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		var v any
		switch c.Type(ctx, k).Val() {
		case "hash":
			v = c.HGetAll(ctx, k).Val()
		case "zset":
			v = c.ZRangeWithScores(ctx, k, 0, -1).Val()
		default:
			v = c.Get(ctx, k).Val()
		}
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(out, "\n")
}
