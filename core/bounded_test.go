package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/internal/opdo"
)

// TestBoundedCallsAgreeWithModel runs batches that the engine splits into
// bounded calls, sent in several round trips (issue 23): a thousand beats,
// statuses and touches in one bucket, a count summing 2,048 shards and
// sweeps of a thousand users and members. The model, which knows nothing
// of calls, must see identical results: every ack and token, status,
// count, member page and change. On miniredis and on a real redis-server
// (skipped where none is installed).
func TestBoundedCallsAgreeWithModel(t *testing.T) {
	const n = 1000
	cfg := scopeConfig(2048)
	cfg.UserBuckets, cfg.ScopeBuckets = 1, 1
	for _, policy := range []core.Policy{core.PolicyMulti, core.PolicyExclusivePerKind} {
		cfg.Policy = policy
		outcomes := map[string][]string{}
		var order []string
		for _, b := range []string{"model", "miniredis", "redis-server"} {
			t.Run(fmt.Sprint(b, "/policy", int(policy)), func(t *testing.T) {
				clk := &manualClock{t: t0}
				cfg := cfg
				cfg.Clock = clk.Now
				cfg.Rand = seededRand{rand.NewChaCha8([32]byte{7})}
				var p core.Presence
				move := func(time.Time) {}
				trips := &tripCounter{}
				switch b {
				case "model":
					m, err := core.NewModel(cfg)
					if err != nil {
						t.Fatal(err)
					}
					p = m
				case "miniredis":
					mr := miniredis.RunT(t)
					mr.SetTime(clk.t)
					mr.ClockTTL(true)
					move = mr.SetTime
					c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
					t.Cleanup(func() { c.Close() })
					trips.inner = goredis.New(c)
				default:
					_, c := realClient(t)
					trips.inner = goredis.New(c)
				}
				if trips.inner != nil {
					e, err := core.New(trips, cfg)
					if err != nil {
						t.Fatal(err)
					}
					p = e
				}
				outcomes[b] = boundedSession(t, p, clk, move, n, policy == core.PolicyMulti)
				order = append(order, b)
				if trips.inner != nil && trips.most > 2*core.MaxBatch/10 {
					t.Errorf("a round trip of %d calls, want the batches split", trips.most)
				}
			})
		}
		if len(order) < 2 {
			continue // a -run filter left one backend
		}
		for _, name := range order[1:] {
			if got, want := outcomes[name], outcomes[order[0]]; !reflect.DeepEqual(got, want) {
				for i := 0; i < len(got) && i < len(want); i++ {
					if got[i] != want[i] {
						t.Fatalf("policy %d: %s differs from %s at %d:\n got  %.400s\n want %.400s", policy, name, order[0], i, got[i], want[i])
					}
				}
				t.Fatalf("policy %d: %s: %d outcomes, %s %d", policy, name, len(got), order[0], len(want))
			}
		}
	}
}

// tripCounter is a Store that counts round trips and their calls.
type tripCounter struct {
	inner core.Store
	trips int
	most  int // calls of the largest round trip
}

func (c *tripCounter) Eval(ctx context.Context, calls []core.Call) []core.Result {
	c.trips++
	c.most = max(c.most, len(calls))
	return c.inner.Eval(ctx, calls)
}

// Publish passes messages on, so that the engine acknowledges its
// outbox in bounded calls too.
func (c *tripCounter) Publish(ctx context.Context, channel string, message []byte) error {
	return c.inner.(core.Publisher).Publish(ctx, channel, message)
}

// boundedSession runs the batches of TestBoundedCallsAgreeWithModel and
// returns what each observed, as text.
func boundedSession(t *testing.T, p core.Presence, clk *manualClock, move func(time.Time), n int, multi bool) []string {
	ctx := context.Background()
	var out []string
	note := func(what string, v any, err error) {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out = append(out, fmt.Sprintf("%s: %+v", what, v))
	}
	at := func(d time.Duration) {
		clk.t = clk.t.Add(d)
		move(clk.t)
	}
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("user-%04d", i)
	}
	// implicit logins (PolicyMulti; else logins one by one): every user's
	// web device, and a second device for every tenth user in the same
	// batch (a user's beats in one call)
	var beats []core.Heartbeat
	for i, u := range users {
		beats = append(beats, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb, Active: true})
		if i%10 == 0 {
			beats = append(beats, core.Heartbeat{User: u, Device: "ios", Kind: core.KindIOS})
		}
	}
	tokens := map[string]string{}
	if multi {
		acks, err := opdo.Do[[]core.Ack](ctx, p, core.HeartbeatBatch(beats[:core.MaxBatch]))
		note("logins", acks, err)
		for i, a := range acks {
			tokens[beats[i].User+"/"+beats[i].Device] = a.Token
		}
	} else {
		for _, b := range beats {
			r, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: b.User, Device: b.Device, Kind: b.Kind})
			note("login", r, err)
			tokens[b.User+"/"+b.Device] = r.Token
		}
	}
	at(2 * time.Second)
	// beats of every device that logged in, with its token: twice for
	// every tenth user (the full path, a user's beats in one call)
	steady := make([]core.Heartbeat, 0, core.MaxBatch)
	for i, b := range beats {
		if tok := tokens[b.User+"/"+b.Device]; tok != "" && b.Device == "web" && len(steady) < core.MaxBatch {
			steady = append(steady, core.Heartbeat{User: b.User, Device: "web", Kind: core.KindWeb, Token: tok, Active: true})
			if i%10 == 0 && len(steady) < core.MaxBatch {
				steady = append(steady, core.Heartbeat{User: b.User, Device: "web", Kind: core.KindWeb, Token: tok})
			}
		}
	}
	acks, err := opdo.Do[[]core.Ack](ctx, p, core.HeartbeatBatch(steady))
	note("beats", acks, err)
	st, err := opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: users})
	note("statuses", st, err)

	touches := make([]core.ScopeTouch, 0, core.MaxBatch)
	for i := range core.MaxBatch {
		sc := video
		if i%2 == 1 {
			sc = room
		}
		touches = append(touches, core.ScopeTouch{Scope: sc, Member: users[i%n]})
	}
	err = opdo.Err(ctx, p, core.TouchBatch(touches))
	note("touches", nil, err)
	for _, sc := range []core.Scope{video, room} {
		c, err := opdo.Do[core.Count](ctx, p, core.ReadCount{Scope: sc})
		note("count "+sc.Class, c, err)
	}
	page, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: room, Cursor: "", Limit: core.MaxPage})
	note("members", page, err)

	// past the windows, not yet past the keys' expiry (a real server's
	// clock does not move with the test's): the sweeps settle a thousand
	// users and members
	at(65 * time.Second)
	rep, err := opdo.Do[core.SweepReport](ctx, p, core.SweepUsers{})
	changes := append([]core.Change(nil), rep.Changes...)
	sort.Slice(changes, func(i, j int) bool { return changes[i].User < changes[j].User })
	note("user sweep", fmt.Sprint(rep.Visited, changes), err)
	rep, err = opdo.Do[core.SweepReport](ctx, p, core.SweepScopes{})
	note("scope sweep", fmt.Sprint(rep.Removed), err)
	for _, sc := range []core.Scope{video, room} {
		c, err := opdo.Do[core.Count](ctx, p, core.ReadCount{Scope: sc})
		note("count after sweep "+sc.Class, c, err)
	}
	st, err = opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: users[:10]})
	note("statuses after sweep", st, err)
	return out
}

// TestRunBoundsSharedRoundTrips runs three Statuses of 1,000 users
// together: Engine.Run lets their bounded calls share a round trip only up
// to about 1 ms (two status calls of 50 users), and each outcome is the
// one its plan gets alone.
func TestRunBoundsSharedRoundTrips(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	trips := &tripCounter{inner: goredis.New(c)}
	clk := &manualClock{t: t0}
	mr.SetTime(clk.t)
	e, err := core.New(trips, core.Config{UserBuckets: 1, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	users := make([]string, core.MaxBatch)
	beats := make([]core.Heartbeat, len(users))
	for i := range users {
		users[i] = fmt.Sprintf("user-%04d", i)
		beats[i] = core.Heartbeat{User: users[i], Device: "web", Kind: core.KindWeb, Active: i%3 == 0}
	}
	if _, err := e.HeartbeatBatch(ctx, beats); err != nil {
		t.Fatal(err)
	}
	alone, err := e.Statuses(ctx, users)
	if err != nil {
		t.Fatal(err)
	}
	plans := make([]core.Plan[[]core.UserStatus], 3)
	steppers := make([]core.Stepper, len(plans))
	for i := range plans {
		plans[i] = planOf[[]core.UserStatus](e.Planner(), core.NowArg(clk.t), core.ReadStatuses{users})
		steppers[i] = plans[i]
	}
	trips.most = 0
	e.Run(ctx, steppers...)
	for i, p := range plans {
		got, err := p.Outcome()
		if err != nil || !reflect.DeepEqual(got, alone) {
			t.Errorf("plan %d: %v, outcome differs from the plan's alone", i, err)
		}
	}
	if trips.most > 2 {
		t.Errorf("a round trip of %d status calls, want at most 2 (about 1 ms)", trips.most)
	}
}

// TestSweepCancelledMidRound: when the context ends after the first round
// trip of a round of sweep steps sent in several, both drivers send the
// rest of the round without the cancellation (what it did is read and
// reported), then stop the pass and release its locks.
func TestSweepCancelledMidRound(t *testing.T) {
	for _, viaRun := range []bool{false, true} {
		t.Run(map[bool]string{false: "drive", true: "Run"}[viaRun], func(t *testing.T) {
			cfg := core.Config{UserBuckets: 4, SweepBatch: 2}
			e, clk, mr := newMiniEngine(t, cfg)
			bg := context.Background()
			for i := range 40 {
				// long metadata: users in the big hash, indexed one by one
				_, err := e.Login(bg, core.Login{User: fmt.Sprint("u", i), Device: "d", Kind: core.KindWeb, Meta: bigMeta})
				must(t, err)
			}
			clk.t = clk.t.Add(time.Hour) // every session expired
			mr.SetTime(clk.t)
			c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { c.Close() })
			for _, sc := range luascripts.All() { // no NOSCRIPT resends in the way
				must(t, c.ScriptLoad(bg, sc.Source()).Err())
			}
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			// cancelled once the first round trip of full sweep steps is back
			// (the round after the first, whose steps are small)
			store := &cancellingStore{inner: goredis.New(c), cancel: cancel, cancelAfter: 2}
			cfg.Clock = clk.Now
			e2, err := core.New(store, cfg)
			must(t, err)
			var r core.SweepReport
			if viaRun {
				p := planOf[core.SweepReport](e2.Planner(), core.NowArg(clk.t), core.SweepUsers{})
				e2.Run(ctx, p)
				r, err = p.Outcome()
			} else {
				r, err = e2.SweepUsers(ctx)
			}
			// 4 small steps, then 4 full ones, two a round trip
			want := []string{"sweep_users×2 cancelled=false", "unlock×4 cancelled=false"}
			if !errors.Is(err, context.Canceled) || r.Steps != 8 || !reflect.DeepEqual(store.after, want) {
				t.Fatalf("sweep: %+v, %v; want 8 steps and context.Canceled; after the cancel: %v, want %v", r, err, store.after, want)
			}
		})
	}
}

// flushingStore empties the server's script cache before round trip n.
type flushingStore struct {
	inner core.Store
	c     *redis.Client
	n     int
	trips int
}

func (s *flushingStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	if s.trips++; s.trips == s.n {
		if err := s.c.ScriptFlush(ctx).Err(); err != nil {
			panic(err)
		}
	}
	return s.inner.Eval(ctx, calls)
}

// TestNoScriptInALaterWave: a round sent in several round trips whose
// scripts leave the server's cache between two of them resends that round
// trip's calls by source, and the outcome is the one without the flush.
func TestNoScriptInALaterWave(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	clk := &manualClock{t: t0}
	mr.SetTime(clk.t)
	cfg := core.Config{UserBuckets: 1, Clock: clk.Now}
	e, err := core.New(goredis.New(c), cfg)
	must(t, err)
	users := make([]string, core.MaxBatch)
	beats := make([]core.Heartbeat, len(users))
	for i := range users {
		users[i] = fmt.Sprintf("user-%04d", i)
		beats[i] = core.Heartbeat{User: users[i], Device: "web", Kind: core.KindWeb, Active: i%2 == 0}
	}
	_, err = e.HeartbeatBatch(ctx, beats)
	must(t, err)
	want, err := e.Statuses(ctx, users)
	must(t, err)
	for _, n := range []int{2, 5, 10} { // 10 round trips: the last one too
		store := &flushingStore{inner: goredis.New(c), c: c, n: n}
		e2, err := core.New(store, cfg)
		must(t, err)
		got, err := e2.Statuses(ctx, users)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("flush before round trip %d: %v, statuses differ: %t", n, err, !reflect.DeepEqual(got, want))
		}
		if store.trips != 11 {
			t.Errorf("flush before round trip %d: %d round trips, want 10 and one resend", n, store.trips)
		}
	}
}

// argCounter is a Store that records the most events a change log append
// (a call on the key ending ":log") carried, and publishes through its
// inner store.
type argCounter struct {
	core.Store
	most int
}

func (c *argCounter) Eval(ctx context.Context, calls []core.Call) []core.Result {
	for _, call := range calls {
		if len(call.Keys) == 1 && strings.HasSuffix(call.Keys[0], ":log") {
			c.most = max(c.most, (len(call.Args)-1)/2)
		}
	}
	return c.Store.Eval(ctx, calls)
}

func (c *argCounter) Publish(ctx context.Context, channel string, message []byte) error {
	return c.Store.(core.Publisher).Publish(ctx, channel, message)
}

// TestChangeLogAppendIsBounded: the changes of one call, here a batch of
// 1,000 users coming online, reach the change log in appends of at most
// core.LogChunk events each (one call of them all would hold Redis for
// as long as the batch is large), all of them and in order.
func TestChangeLogAppendIsBounded(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	clk := &manualClock{t: t0}
	mr.SetTime(clk.t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	store := &argCounter{Store: goredis.New(c)}
	e, err := core.New(store, core.Config{Clock: clk.Now, UserBuckets: 1, ChangeLog: 10_000, CoalesceWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	beats := make([]core.Heartbeat, core.MaxBatch)
	for i := range beats {
		beats[i] = core.Heartbeat{User: fmt.Sprintf("user-%04d", i), Device: "web", Kind: core.KindWeb, Active: true}
	}
	if _, err := e.HeartbeatBatch(ctx, beats); err != nil {
		t.Fatal(err)
	}
	if store.most == 0 || store.most > core.LogChunk {
		t.Fatalf("a change log append of %d events, want 1 to %d", store.most, core.LogChunk)
	}
	var logged []string
	for after := ""; ; {
		entries, _, err := e.ChangeLogAfter(ctx, after, core.MaxPage)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			break
		}
		for _, en := range entries {
			logged = append(logged, en.Change.User)
		}
		after = entries[len(entries)-1].ID
	}
	if len(logged) != len(beats) {
		t.Fatalf("%d changes logged, want %d", len(logged), len(beats))
	}
	if !sort.StringsAreSorted(logged) {
		t.Errorf("changes logged out of order: %v…", logged[:10])
	}
}
