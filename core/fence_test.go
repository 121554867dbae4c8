package core_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

// TestLiveSessionStoresNoFence checks on a real redis-server that a device
// with a live session record carries no fence item (the record implies its
// fence); that an implicit login under no fence sets none; and that the
// item appears when the record goes before the fence ends, or when the
// fence says more than the record (a kick; an end later than the record
// implies).
func TestLiveSessionStoresNoFence(t *testing.T) {
	_, c := realClient(t)
	clk := &manualClock{t: t0}
	engine := func(fence time.Duration) *core.Engine {
		e, err := core.New(goredis.New(c), core.Config{Clock: clk.Now, KickFence: fence})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := engine(time.Hour)
	ctx := context.Background()
	// items reports how many items (devices and fences) user's static
	// record holds, and whether dev has a fence item.
	items := func(user, dev string) (int, bool) {
		t.Helper()
		rec := staticRecord(ctx, t, c, core.Keys(e), user)
		if rec == "" {
			return 0, false
		}
		parts := strings.Split(rec, "\x1d")[1:]
		return len(parts), slices.ContainsFunc(parts, func(p string) bool { return strings.HasPrefix(p, "\x02"+dev+"\x1f") })
	}
	check := func(what, dev string, wantLen int, wantFence bool) {
		t.Helper()
		if n, f := items("u", dev); n != wantLen || f != wantFence {
			t.Errorf("%s: %d items, fence item %v; want %d, %v", what, n, f, wantLen, wantFence)
		}
	}
	at := func(d time.Duration) { clk.t = t0.Add(d) }

	// A device that only heartbeats has no fence (docs/design.md §5).
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "v", Device: "web", Kind: core.KindWeb}); err != nil {
		t.Fatal(err)
	}
	if n, f := items("v", "web"); n != 1 || f {
		t.Errorf("after an implicit login: %d items, fence item %v; want 1, false", n, f)
	}

	res, err := e.Login(ctx, core.Login{User: "u", Device: "web", Kind: core.KindWeb, Gateway: "gw1"})
	if err != nil {
		t.Fatal(err)
	}
	first := res.Token
	check("after a login", "web", 1, false)
	at(10 * time.Second)
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: first, Gateway: "gw2"}); err != nil {
		t.Fatal(err)
	}
	check("after a full-path beat", "web", 1, false)

	at(20 * time.Second)
	if _, err := e.Disconnect(ctx, "u", "web", first); err != nil {
		t.Fatal(err)
	}
	check("after a disconnect within KickFence", "web", 1, true)

	at(30 * time.Second)
	ack, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb})
	if err != nil {
		t.Fatal(err)
	}
	check("after an implicit login under the fence", "web", 1, false)
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: first}); err != core.ErrSessionReplaced {
		t.Errorf("the first token during the implicit session: %v, want ErrSessionReplaced", err)
	}

	// A record whose window has passed is deleted by the sweep; its fence stays.
	at(5 * time.Minute)
	if _, err := e.SweepUsers(ctx); err != nil {
		t.Fatal(err)
	}
	check("after the sweep deleted the record", "web", 1, true)
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: first}); err != core.ErrSessionReplaced {
		t.Errorf("the first token after the sweep: %v, want ErrSessionReplaced", err)
	}

	// A kick writes a fence with no token.
	at(6 * time.Minute)
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: ack.Token}); err != nil {
		t.Fatal(err)
	}
	check("after the implicit login's token came back", "web", 1, false)
	exclusive := core.PolicyExclusive
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "phone", Kind: core.KindIOS, Policy: &exclusive}); err != nil {
		t.Fatal(err)
	}
	if n, f := items("u", "web"); n != 2 || !f {
		t.Errorf("after a kick: %d items, fence item %v; want 2 (phone's record, web's fence), true", n, f)
	}
	if _, f := items("u", "phone"); f {
		t.Error("after a kick the kicking device has a fence item")
	}

	// A login by an engine with a shorter KickFence: its record implies a
	// fence that ends before the one in force, which the field keeps, with
	// the new token.
	at(7 * time.Minute)
	short := engine(time.Minute)
	res, err = short.Login(ctx, core.Login{User: "u", Device: "web", Kind: core.KindWeb})
	if err != nil {
		t.Fatal(err)
	}
	check("after a login under a fence that ends later", "web", 3, true)
	at(8 * time.Minute)
	if _, err := short.Disconnect(ctx, "u", "web", res.Token); err != nil {
		t.Fatal(err)
	}
	at(30 * time.Minute)
	if _, err := short.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: ack.Token}); err != core.ErrSessionReplaced {
		t.Errorf("a superseded token before the longer fence ends: %v, want ErrSessionReplaced", err)
	}
	if _, err := short.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: res.Token}); err != nil {
		t.Errorf("the token in force: %v", err)
	}
}

// staticRecord is user's static record (lua/recordlib.lua), from its page
// or the big hash ("" none).
func staticRecord(ctx context.Context, t *testing.T, c *redis.Client, k keyspace.Layout, user string) string {
	t.Helper()
	b := k.UserBucket(user)
	meta := c.HGetAll(ctx, k.Meta(b)).Val()
	level, _ := strconv.Atoi(meta["L"])
	split, _ := strconv.Atoi(meta["s"])
	for _, key := range []string{k.Page(b, pageOf(user, level, split)), k.Big(b)} {
		rec, err := c.HGet(ctx, key, user).Result()
		if err == nil {
			return rec
		}
		if err != redis.Nil {
			t.Fatal(err)
		}
	}
	return ""
}
