package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestLiveSessionStoresNoFence checks on a real redis-server that a device
// with a live session record carries no fence field (the record implies its
// fence), while the key's expiry still covers the fence; that an implicit
// login under no fence sets none (the key expires with the window); and
// that the field
// appears when the record goes before the fence ends, or when the fence says
// more than the record (a kick; an end later than the record implies).
func TestLiveSessionStoresNoFence(t *testing.T) {
	srv, c := realClient(t)
	clk := &manualClock{t: t0}
	engine := func(fence time.Duration) *core.Engine {
		e, err := core.New(goredis.New(c), core.Config{Clock: clk, KickFence: fence})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := engine(time.Hour)
	ctx := context.Background()
	key := e.Keys().Devices("u")
	do := func(args ...string) int64 {
		t.Helper()
		v, err := srv.Do(args...)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := v.(int64)
		if !ok {
			t.Fatalf("%v: got %#v, want an integer", args, v)
		}
		return n
	}
	// fields reports the device hash's size, less the steady beat's copy
	// of the due score, and whether dev has a fence field.
	fields := func(dev string) (int64, bool) {
		t.Helper()
		return do("HLEN", key) - do("HEXISTS", key, "\x03"), do("HEXISTS", key, "\x02"+dev) == 1
	}
	check := func(what, dev string, wantLen int64, wantFence bool) {
		t.Helper()
		if n, f := fields(dev); n != wantLen || f != wantFence {
			t.Errorf("%s: %d fields, fence field %v; want %d, %v", what, n, f, wantLen, wantFence)
		}
	}
	at := func(d time.Duration) { clk.t = t0.Add(d) }

	// A device that only heartbeats has no fence: its key expires soon
	// after its window (docs/design.md §5).
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "v", Device: "web", Kind: core.KindWeb}); err != nil {
		t.Fatal(err)
	}
	vkey := e.Keys().Devices("v")
	if n, f := do("HLEN", vkey)-do("HEXISTS", vkey, "\x03"), do("HEXISTS", vkey, "\x02web"); n != 2 || f != 0 {
		t.Errorf("after an implicit login: %d fields, fence field %v; want 2, false", n, f == 1)
	}
	if ttl := do("PTTL", vkey); ttl > int64(70*time.Second/time.Millisecond) {
		t.Errorf("after an implicit login the key expires in %d ms, past the window and the grace", ttl)
	}

	res, err := e.Login(ctx, core.Login{User: "u", Device: "web", Kind: core.KindWeb, Gateway: "gw1"})
	if err != nil {
		t.Fatal(err)
	}
	first := res.Token
	check("after a login", "web", 2, false)
	// the key lives until the fence's end (an hour), not the window's (a minute)
	if ttl := do("PTTL", key); ttl < int64(59*time.Minute/time.Millisecond) {
		t.Errorf("after a login the key expires in %d ms, before the fence ends", ttl)
	}
	at(10 * time.Second)
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: first, Gateway: "gw2"}); err != nil {
		t.Fatal(err)
	}
	check("after a full-path beat", "web", 2, false)

	at(20 * time.Second)
	if _, err := e.Disconnect(ctx, "u", "web", first); err != nil {
		t.Fatal(err)
	}
	check("after a disconnect within KickFence", "web", 1, true)
	if ttl := do("PTTL", key); ttl < int64(59*time.Minute/time.Millisecond) {
		t.Errorf("after a disconnect the key expires in %d ms, before the fence ends", ttl)
	}

	at(30 * time.Second)
	ack, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb})
	if err != nil {
		t.Fatal(err)
	}
	check("after an implicit login under the fence", "web", 2, false)
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
	check("after the implicit login's token came back", "web", 2, false)
	exclusive := core.PolicyExclusive
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "phone", Kind: core.KindIOS, Policy: &exclusive}); err != nil {
		t.Fatal(err)
	}
	if n, f := fields("web"); n != 3 || !f {
		t.Errorf("after a kick: %d fields, fence field %v; want 3 (phone's record, web's fence), true", n, f)
	}
	if _, f := fields("phone"); f {
		t.Error("after a kick the kicking device has a fence field")
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
	check("after a login under a fence that ends later", "web", 5, true)
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
