package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// newRecordedEngine returns an engine whose store records every call.
func newRecordedEngine(tb testing.TB, cfg core.Config) (*core.Engine, *recorder, *manualClock, *miniredis.Miniredis) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	clk := &manualClock{t: t0}
	mr.SetTime(clk.t)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	tb.Cleanup(func() { c.Close() })
	rec := &recorder{inner: goredis.New(c)}
	cfg.Clock = clk.Now
	e, err := core.New(rec, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e, rec, clk, mr
}

func (c *manualClock) advance(mr *miniredis.Miniredis, d time.Duration) {
	c.t = c.t.Add(d)
	mr.SetTime(c.t)
}

// TestHeartbeatRacingSweepSurvives lands a heartbeat after the sweeper has
// decided a device is due (its index entry is past) and before the sweep
// script runs: the script re-checks, so the device survives and no
// OFFLINE is published. The same holds for a scope member.
func TestHeartbeatRacingSweepSurvives(t *testing.T) {
	ctx := context.Background()
	e, rec, clk, mr := newRecordedEngine(t, scopeConfig(4))
	other := engineOn(t, mr, clk, scopeConfig(4))
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Active: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.Touch(ctx, video, "m"); err != nil {
		t.Fatal(err)
	}
	clk.advance(mr, time.Second)
	if _, err := e.SweepUsers(ctx); err != nil {
		t.Fatal(err)
	}
	// Past the device's window (60 s) and the member's (60 s): both due.
	clk.advance(mr, 60*time.Second+time.Millisecond)
	raced := 0
	rec.before = func(calls []core.Call) error {
		for _, c := range calls {
			if name := scriptOf(c); (name == "sweep_users" || name == "sweep_scopes") && raced < 2 {
				raced++
				if _, err := other.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web"}); err != nil {
					return err
				}
				return other.Touch(ctx, video, "m")
			}
		}
		return nil
	}
	r, err := e.SweepUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Changes) != 0 {
		t.Fatalf("sweep published %v for a device that heartbeat in time", r.Changes)
	}
	rs, err := e.SweepScopes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Removed != 0 {
		t.Fatalf("scope sweep removed %d members, want 0", rs.Removed)
	}
	rec.before = nil
	if raced != 2 {
		t.Fatalf("the race was injected %d times, want 2", raced)
	}
	st, err := e.Status(ctx, "u")
	if err != nil || st.Status != core.StatusOnline || len(st.Devices) != 1 {
		t.Fatalf("status %+v, %v: the device must survive", st, err)
	}
	page, err := e.Members(ctx, video, "", 10)
	if err != nil || len(page.Members) != 1 {
		t.Fatalf("members %+v, %v: the member must survive", page, err)
	}
}

// pageUsers is the most users a page of user records holds
// (lua/recordlib.lua's PAGE_USERS): a sweep step settles a due page's users
// all, so a step settles at most SweepBatch users and one page more.
const pageUsers = 60

// TestSweepStepsAreBounded settles 1,000 due users with SweepBatch 64 and
// checks that it took at least 1000/(64 + a page) steps and settled every
// user.
func TestSweepStepsAreBounded(t *testing.T) {
	ctx := context.Background()
	e, rec, clk, mr := newRecordedEngine(t, core.Config{SweepBatch: 64, UserBuckets: 2})
	beats := make([]core.Heartbeat, 1000)
	for i := range beats {
		beats[i] = core.Heartbeat{User: fmt.Sprint("user-", i), Device: "d", Active: true}
	}
	if _, err := e.HeartbeatBatch(ctx, beats); err != nil {
		t.Fatal(err)
	}
	clk.advance(mr, time.Second)
	r, err := e.SweepUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Changes) != 1000 {
		t.Fatalf("published %d changes, want 1000", len(r.Changes))
	}
	if want := 1000 / (64 + pageUsers); r.Steps < want {
		t.Fatalf("%d steps, want at least %d bounded steps", r.Steps, want)
	}
	// An idle pass costs one cheap call per bucket.
	before := rec.count()
	if r, err = e.SweepUsers(ctx); err != nil || r.Visited != 0 {
		t.Fatalf("idle pass: %+v, %v", r, err)
	}
	if got := rec.count() - before; got != 2 {
		t.Fatalf("idle pass made %d calls, want 2 (one per bucket)", got)
	}
}

// TestSweepLock checks that a bucket locked by another sweeper is skipped
// and that only the holder's token releases a lock.
func TestSweepLock(t *testing.T) {
	ctx := context.Background()
	e, _, clk, mr := newRecordedEngine(t, core.Config{UserBuckets: 1, SweepBatch: 1})
	for _, u := range []string{"a", "b", "c"} {
		if _, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(mr, time.Second)
	lockKey := "presence:{u0}:lock"
	if err := mr.Set(lockKey, "someone-else"); err != nil {
		t.Fatal(err)
	}
	r, err := e.SweepUsers(ctx)
	if err != nil || r.Held != 1 || len(r.Changes) != 0 {
		t.Fatalf("with the lock held elsewhere: %+v, %v; want the bucket skipped", r, err)
	}
	if got, _ := mr.Get(lockKey); got != "someone-else" {
		t.Fatalf("the other sweeper's lock became %q", got)
	}
	mr.Del(lockKey)
	if r, err = e.SweepUsers(ctx); err != nil || len(r.Changes) != 3 {
		t.Fatalf("after release: %+v, %v; want 3 changes", r, err)
	}
	if mr.Exists(lockKey) {
		t.Fatal("the sweeper left its lock behind")
	}
}

// TestSweepReleasesLockOnFailure fails the second step of a pass and checks
// that the lock taken by the first is released with the pass's token.
func TestSweepReleasesLockOnFailure(t *testing.T) {
	ctx := context.Background()
	e, rec, clk, mr := newRecordedEngine(t, core.Config{UserBuckets: 1, SweepBatch: 1})
	for _, u := range []string{"a", "b"} {
		if _, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(mr, time.Second)
	steps := 0
	boom := fmt.Errorf("injected: %w", core.ErrUnavailable)
	rec.before = func(calls []core.Call) error {
		if scriptOf(calls[0]) == "sweep_users" {
			if steps++; steps == 2 {
				return boom
			}
		}
		return nil
	}
	_, err := e.SweepUsers(ctx)
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("err = %v, want one matching ErrUnavailable", err)
	}
	if mr.Exists("presence:{u0}:lock") {
		t.Fatal("the failed pass left its lock behind")
	}
}

// newRecordedRealEngine is newRecordedEngine on a throwaway redis-server,
// where HSCAN walks a large hash in steps (miniredis returns it whole).
func newRecordedRealEngine(tb testing.TB, cfg core.Config, clk *manualClock) (*core.Engine, *recorder) {
	tb.Helper()
	_, c := realClient(tb)
	rec := &recorder{inner: goredis.New(c)}
	cfg.Clock = clk.Now
	e, err := core.New(rec, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e, rec
}

// scriptCalls counts the recorded calls of the named script from index from.
func (r *recorder) scriptCalls(from int, name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls[from:] {
		if scriptOf(c) == name {
			n++
		}
	}
	return n
}

// TestScopeSweepStepsAreBounded sweeps a scope whose expired members far
// outnumber what one step may examine, all in one exact set or one compact
// shard (a hashtable, past the listpack limit), and checks that the sweep
// took several calls, removed every expired member and left the exact
// count of the live ones. A step that walked the whole set or shard (one
// HGETALL) would fail it.
func TestScopeSweepStepsAreBounded(t *testing.T) {
	const expired, live, budget = 3000, 300, 128
	tests := []struct {
		name   string
		sc     core.Scope
		spread bool
		script string // the script whose calls do the removing
	}{
		{"exact", room, false, "sweep_scopes"},
		{"compact", video, false, "sweep_scopes"},
		{"compact spread", video, true, "shard_sweep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := &manualClock{t: t0}
			cfg := scopeConfigSpread(1, tt.spread)
			cfg.SweepBudget = budget
			e, rec := newRecordedRealEngine(t, cfg, clk)
			touch := func(from, to int) {
				for lo := from; lo < to; lo += core.MaxBatch {
					hi := lo + core.MaxBatch
					if hi > to {
						hi = to
					}
					var batch []core.ScopeTouch
					for i := lo; i < hi; i++ {
						batch = append(batch, core.ScopeTouch{Scope: tt.sc, Member: fmt.Sprint("m", i)})
					}
					if err := e.TouchBatch(ctx, batch); err != nil {
						t.Fatal(err)
					}
				}
			}
			touch(0, expired)
			clk.t = clk.t.Add(45 * time.Second)
			touch(expired, expired+live)
			clk.t = clk.t.Add(20 * time.Second) // the first ones are past their 60 s window
			before := rec.count()
			r, err := e.SweepScopes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.Removed != expired {
				t.Fatalf("removed %d, want %d", r.Removed, expired)
			}
			// each call examines about the budget (an HSCAN step may bring
			// a little more): twice the budget is a generous bound
			if calls, want := rec.scriptCalls(before, tt.script), expired/(2*budget); calls < want {
				t.Fatalf("%d %s calls removed %d members, want at least %d bounded calls", calls, tt.script, expired, want)
			}
			c, err := e.Count(ctx, tt.sc)
			if err != nil || c.N != live {
				t.Fatalf("count %+v, %v; want %d", c, err, live)
			}
			page, err := e.Members(ctx, tt.sc, "", 1000)
			if err != nil || len(page.Members) != live {
				t.Fatalf("%d members, %v; want %d", len(page.Members), err, live)
			}
		})
	}
}

// TestUserSweepStepsAreBounded settles N due users in one bucket and
// checks that every user was settled in at least N/batch steps, with the
// default batch too.
func TestUserSweepStepsAreBounded(t *testing.T) {
	const users = 1000
	tests := []struct {
		name  string
		batch int // 0: the default
		per   int // the most users a step may settle
	}{
		{"default batch", 0, 64 + pageUsers},
		{"batch 10", 10, 10 + pageUsers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e, rec, clk, mr := newRecordedEngine(t, core.Config{SweepBatch: tt.batch, UserBuckets: 1})
			beats := make([]core.Heartbeat, users)
			for i := range beats {
				beats[i] = core.Heartbeat{User: fmt.Sprint("user-", i), Device: "d", Active: true}
			}
			if _, err := e.HeartbeatBatch(ctx, beats); err != nil {
				t.Fatal(err)
			}
			clk.advance(mr, time.Second)
			before := rec.count()
			r, err := e.SweepUsers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.Visited != users || len(r.Changes) != users {
				t.Fatalf("visited %d, published %d; want %d each", r.Visited, len(r.Changes), users)
			}
			// (the recorder also sees the EVAL that follows a first NOSCRIPT)
			if calls, want := rec.scriptCalls(before, "sweep_users"), users/tt.per; calls < want || r.Steps < want {
				t.Fatalf("%d calls (%d steps reported) settled %d users, want at least %d steps", calls, r.Steps, users, want)
			}
		})
	}
}

// TestSweepBigHashUserTakesTwoVisits follows a user whose one device has a
// 36-byte ID, so that its records live in the big hash, through the two
// sweep visits of its expiry: the first moves its short records to its
// page and indexes the page, not the user, at the end of LeaveDelay; the
// second publishes OFFLINE and leaves nothing behind.
func TestSweepBigHashUserTakesTwoVisits(t *testing.T) {
	ctx := context.Background()
	e, _, clk, mr := newRecordedEngine(t, core.Config{UserBuckets: 1, LeaveDelay: 15 * time.Second, CoalesceWindow: -1})
	k := core.Keys(e)
	const user, device = "u", "0000002a-0000-4000-8000-000000052a56"
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: user, Device: device, Kind: core.KindWeb, Active: true}); err != nil {
		t.Fatal(err)
	}
	page := "\x01" + fmt.Sprint(core.PageOf(user, 0, 0))
	steps := []struct {
		name    string
		advance time.Duration
		big     bool               // the user's records in the big hash
		due     map[string]float64 // the due index, member → ms after t0
		online  bool               // the user's published status ONLINE, as the counts say
	}{
		{"t0+1s: the ONLINE change published; the user indexed itself", time.Second, true, nil, true},
		{"t0+61s: the device is gone; its page waits LeaveDelay", 60 * time.Second, false, map[string]float64{page: 76_000}, true},
		{"t0+76s: OFFLINE published; nothing left", 15 * time.Second, false, map[string]float64{}, false},
	}
	for _, s := range steps {
		clk.advance(mr, s.advance)
		if _, err := e.SweepUsers(ctx); err != nil {
			t.Fatal(err)
		}
		if got := mr.Exists(k.Big(0)) && mr.HGet(k.Big(0), user) != ""; got != s.big {
			t.Errorf("%s: user in the big hash %v, want %v", s.name, got, s.big)
		}
		if s.due != nil {
			got := map[string]float64{}
			if mr.Exists(k.Due(0)) {
				members, err := mr.ZMembers(k.Due(0))
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range members {
					score, _ := mr.ZScore(k.Due(0), m)
					got[m] = score - float64(t0.UnixMilli())
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(s.due) {
				t.Errorf("%s: due index %v, want %v", s.name, got, s.due)
			}
		}
		online, err := e.Online(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if s.online {
			want = 1
		}
		if online[core.StatusOnline] != want {
			t.Errorf("%s: %d users published ONLINE, want %d", s.name, online[core.StatusOnline], want)
		}
	}
	if keys := mr.Keys(); len(keys) > 0 {
		for _, key := range keys {
			if key == k.Page(0, 0) || key == k.Big(0) {
				t.Errorf("left behind: %s", key)
			}
		}
	}
}
