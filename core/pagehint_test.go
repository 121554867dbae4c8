package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestPageHintsFollowSplits beats users of one bucket from an engine that
// learnt the bucket's page geometry while it had one page, after another
// engine's logins split the pages under it. Every beat must still be
// steady (no heartbeat_full.lua), reach the user's records and move only
// them; the first beat that misses reads the geometry, and the beats after
// it, in later calls, name the right page at once (one HMGET each).
func TestPageHintsFollowSplits(t *testing.T) {
	for name, addr := range map[string]func(t *testing.T) string{
		"miniredis":    func(t *testing.T) string { return miniredis.RunT(t).Addr() },
		"redis-server": func(t *testing.T) string { srv, _ := realClient(t); return srv.Addr },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := redis.NewClient(&redis.Options{Addr: addr(t)})
			t.Cleanup(func() { c.Close() })
			clk := &manualClock{t: t0}
			cfg := core.Config{Clock: clk.Now, UserBuckets: 1}
			rec := &recorder{inner: goredis.New(c)}
			stale, err := core.New(rec, cfg)
			if err != nil {
				t.Fatal(err)
			}
			other, err := core.New(goredis.New(c), cfg)
			if err != nil {
				t.Fatal(err)
			}
			const early, late = 10, 400
			tokens := map[string]string{}
			login := func(e *core.Engine, i int) {
				u := "user-" + strconv.Itoa(i)
				ack, err := e.Login(ctx, core.Login{User: u, Device: "web", Kind: core.KindWeb})
				if err != nil {
					t.Fatal(err)
				}
				tokens[u] = ack.Token
			}
			beatAll := func(e *core.Engine, n int) map[string]int {
				t.Helper()
				before := rec.count()
				for i := range n {
					u := "user-" + strconv.Itoa(i)
					if _, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb, Token: tokens[u], Active: true}); err != nil {
						t.Fatalf("beat of %s: %v", u, err)
					}
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				used := map[string]int{}
				for _, call := range rec.calls[before:] {
					used[scriptOf(call)]++
				}
				return used
			}
			for i := range early {
				login(stale, i)
			}
			clk.t = clk.t.Add(2 * time.Second) // past the coalesce window: the logins' changes publish
			beatAll(stale, early)              // publishes; the steady beats that miss teach the geometry
			if used := beatAll(stale, early); used["heartbeat"] != 0 || used["beat"] != early {
				t.Fatalf("beats with one page: %v, want %d steady calls alone", used, early)
			}
			meta := func() string {
				return c.HGet(ctx, "presence:{u0}:m", "L").Val() + "/" + c.HGet(ctx, "presence:{u0}:m", "s").Val()
			}
			was := meta()
			for i := early; i < late; i++ {
				login(other, i)
			}
			if meta() == was {
				t.Fatalf("%d users left the geometry at %s: no split to test", late, was)
			}
			clk.t = clk.t.Add(2 * time.Second)
			if used := beatAll(stale, early); used["heartbeat"] != 0 || used["beat"] != early {
				t.Errorf("beats with stale hints: %v, want %d steady calls alone", used, early)
			}
			for i := range early {
				u := "user-" + strconv.Itoa(i)
				st, err := stale.Status(ctx, u)
				if err != nil || st.Status != core.StatusOnline {
					t.Errorf("%s after stale-hinted beats: %v, %v", u, st.Status, err)
				}
			}
		})
	}
}

// TestSteadyBeatsKeepTheirPageAlive beats one device steadily for a day
// and a half, past the pages' KEEP (a day and KeyGrace): its page must
// never expire, and the beats must move its expiry only at the first beat
// in each half of KEEP, not at every beat (lua/heartbeat_steady.lua).
func TestSteadyBeatsKeepTheirPageAlive(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	clk := &manualClock{t: t0}
	mr.SetTime(t0)
	rec := &recorder{inner: goredis.New(c)}
	e, err := core.New(rec, core.Config{Clock: clk.Now, UserBuckets: 1})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := e.Login(ctx, core.Login{User: "u", Device: "web", Kind: core.KindWeb})
	if err != nil {
		t.Fatal(err)
	}
	page := core.Keys(e).Page(0, 0)
	const every, span = 25 * time.Second, 36 * time.Hour
	moves, beats, full := 0, 0, 0
	keep := mr.TTL(page) // as the login left it: KEEP
	for clk.t.Sub(t0) < span {
		clk.advance(mr, every)
		n := rec.count()
		if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: ack.Token, Active: true}); err != nil {
			t.Fatalf("beat at t0+%v: %v", clk.t.Sub(t0), err)
		}
		if rec.count()-n > 1 { // the steady beat and heartbeat_full.lua
			full++
		}
		beats++
		ttl := mr.TTL(page)
		if ttl <= 0 {
			t.Fatalf("at t0+%v the page %s has no expiry left (%v)", clk.t.Sub(t0), page, ttl)
		}
		if ttl >= keep-time.Second {
			moves++
		}
	}
	if full > 1 {
		t.Errorf("%d beats took the full path, want only the one that publishes the login", full)
	}
	// the beats that publish the login and those in the halves of KEEP
	if moves < 2 || moves > 6 {
		t.Errorf("%d beats over %v moved the page's expiry %d times, want one in each half of KEEP (3 or 4) and the full path's (1)", beats, span, moves)
	}
	if st, err := e.Status(ctx, "u"); err != nil || st.Status != core.StatusOnline {
		t.Errorf("after %v of beats: %v, %v", span, st.Status, err)
	}
}
