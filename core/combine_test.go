package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/internal/slot"
)

// Group commit (core/combine.go): the tests hold round trips in a gate
// store and look at what reaches it; no test waits on time to decide.

// gateStore records each round trip (its calls, and whether its context
// had ended when it went on) and, while held, keeps each one waiting until
// the test lets it go. fail, when set, fails the calls it returns an
// error for.
type gateStore struct {
	inner   core.Store
	mu      sync.Mutex
	trips   [][]core.Call
	ctxDone []bool
	hold    bool
	entered chan []core.Call // each held round trip, as it arrives
	release chan struct{}
	fail    func(core.Call) error
}

func (g *gateStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	g.mu.Lock()
	g.trips = append(g.trips, kept(calls))
	i := len(g.trips) - 1
	g.ctxDone = append(g.ctxDone, false)
	hold, fail := g.hold, g.fail
	g.mu.Unlock()
	if hold {
		g.entered <- calls
		<-g.release
	}
	g.mu.Lock()
	g.ctxDone[i] = ctx.Err() != nil
	g.mu.Unlock()
	res := g.inner.Eval(ctx, calls)
	if fail != nil {
		for k, c := range calls {
			if err := fail(c); err != nil {
				res[k] = core.Result{Err: err}
			}
		}
	}
	return res
}

func (g *gateStore) setHold(on bool) {
	g.mu.Lock()
	g.hold = on
	g.mu.Unlock()
}

// tripsFrom returns the round trips from the n-th on, as script names
// with the users each names.
func (g *gateStore) tripsFrom(n int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, t := range g.trips[n:] {
		var parts []string
		for _, c := range t {
			parts = append(parts, scriptOf(c))
		}
		out = append(out, strings.Join(parts, "+"))
	}
	return out
}

func (g *gateStore) tripCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.trips)
}

// newGateEngine returns an engine over a gate store on its own miniredis
// (scripts loaded, so that no NOSCRIPT resend adds round trips), at a fixed
// instant, with a seeded token source and no coalescing.
func newGateEngine(t *testing.T, cfg core.Config) (*core.Engine, *gateStore, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
	mr.SetTime(clk.t)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	for _, sc := range luascripts.All() {
		must(t, c.ScriptLoad(context.Background(), sc.Source()).Err())
	}
	g := &gateStore{inner: goredis.New(c), entered: make(chan []core.Call, 100), release: make(chan struct{}, 100)}
	cfg.Clock = clk.Now
	if cfg.CoalesceWindow == 0 {
		cfg.CoalesceWindow = -1 // a login's change is published at once: the next beat is steady
	}
	if cfg.Rand == nil {
		cfg.Rand = seededRand{rand.NewChaCha8([32]byte{5})}
	}
	e, err := core.New(g, cfg)
	must(t, err)
	return e, g, mr
}

// waitQueued waits until n calls wait in e's group commit queue.
func waitQueued(t *testing.T, e *core.Engine, n int) {
	t.Helper()
	for i := 0; core.GroupQueued(e) != n; i++ {
		if i > 100_000 {
			t.Fatalf("%d calls queued, want %d", core.GroupQueued(e), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// beatsOf counts the users of users whose beats call c carries (by the
// user IDs among its arguments: the steady beat's layout is not ours).
func beatsOf(c core.Call, users ...string) int {
	n := 0
	for _, u := range users {
		if slices.Contains(c.Args, u) {
			n++
		}
	}
	return n
}

// result is one call's outcome, as text.
type result struct {
	who string
	out string
}

// loginAll logs devices d of users in, returning their tokens.
func loginAll(t *testing.T, e *core.Engine, users ...string) map[string]string {
	t.Helper()
	tokens := map[string]string{}
	for _, u := range users {
		r, err := e.Login(context.Background(), core.Login{User: u, Device: "d", Kind: core.KindWeb, Gateway: "g"})
		must(t, err)
		tokens[u] = r.Token
	}
	return tokens
}

// TestGroupCommitIdleCallLeavesAlone: one call after another on an idle
// engine leaves at once, alone, with the very round trips of an engine
// without group commit.
func TestGroupCommitIdleCallLeavesAlone(t *testing.T) {
	ctx := context.Background()
	var streams [2][]string
	for k, gc := range []int{0, -1} {
		e, g, _ := newGateEngine(t, core.Config{GroupCommit: gc, UserBuckets: 4})
		tok := loginAll(t, e, "alice")["alice"]
		_, err := e.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "d", Kind: core.KindWeb, Token: tok, Active: true})
		must(t, err)
		_, err = e.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "phone", Kind: core.KindIOS})
		must(t, err)
		_, err = e.Status(ctx, "alice")
		must(t, err)
		must(t, e.Touch(ctx, core.Scope{Class: "room", ID: "1"}, "alice"))
		_, err = e.Leave(ctx, core.Scope{Class: "room", ID: "1"}, "alice")
		must(t, err)
		_, err = e.SetManual(ctx, "alice", core.ManualDND, 0)
		must(t, err)
		_, err = e.Disconnect(ctx, "alice", "phone", "")
		must(t, err)
		if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "", Device: "d"}); !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("invalid beat: %v", err)
		}
		g.mu.Lock()
		for _, trip := range g.trips {
			var parts []string
			for _, c := range trip {
				parts = append(parts, fmt.Sprintf("%s %q %q", scriptOf(c), c.Keys, c.Args))
			}
			streams[k] = append(streams[k], strings.Join(parts, " | "))
		}
		g.mu.Unlock()
		if n := core.GroupQueued(e); n != 0 {
			t.Errorf("%d calls left queued", n)
		}
	}
	if !reflect.DeepEqual(streams[0], streams[1]) {
		t.Fatalf("round trips with group commit:\n%s\nwithout:\n%s", strings.Join(streams[0], "\n"), strings.Join(streams[1], "\n"))
	}
}

// TestGroupCommitSharesCalls: calls that arrive while one is on the wire
// leave together when it is back: the beats of one bucket as one steady
// script call, the statuses as one status call, the others in the same
// round trip.
func TestGroupCommitSharesCalls(t *testing.T) {
	ctx := context.Background()
	e, g, _ := newGateEngine(t, core.Config{GroupCommit: 1, UserBuckets: 1})
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9", "u10"}
	tokens := loginAll(t, e, users...)
	before := g.tripCount()
	g.setHold(true)
	results := make(chan result, 20)
	beat := func(u string) {
		ack, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "d", Kind: core.KindWeb, Token: tokens[u], Active: true})
		results <- result{u, fmt.Sprintf("token ok=%v err=%v", ack.Token == tokens[u], err)}
	}
	go beat("u0")
	if calls := <-g.entered; len(calls) != 1 {
		t.Fatalf("the first call went with %d others", len(calls)-1)
	}
	for i, u := range users[1:] {
		go beat(u)
		waitQueued(t, e, i+1)
	}
	statuses := []string{"u1", "u2", "nobody"}
	for i, u := range statuses {
		go func() {
			st, err := e.Status(ctx, u)
			results <- result{"status " + u, fmt.Sprintf("%v devices=%d err=%v", st.Status, len(st.Devices), err)}
		}()
		waitQueued(t, e, len(users)-1+i+1)
	}
	go func() {
		err := e.Touch(ctx, core.Scope{Class: "room", ID: "9"}, "u1")
		results <- result{"touch", fmt.Sprintf("err=%v", err)}
	}()
	waitQueued(t, e, len(users)-1+len(statuses)+1)
	g.release <- struct{}{}
	calls := <-g.entered
	g.setHold(false)
	g.release <- struct{}{}
	got := map[string]string{}
	for range len(users) + len(statuses) + 1 {
		r := <-results
		got[r.who] = r.out
	}
	for _, u := range users {
		if got[u] != "token ok=true err=<nil>" {
			t.Errorf("%s: %s", u, got[u])
		}
	}
	want := map[string]string{"status u1": "ONLINE devices=1 err=<nil>", "status u2": "ONLINE devices=1 err=<nil>",
		"status nobody": "OFFLINE devices=0 err=<nil>", "touch": "err=<nil>"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s, want %s", k, got[k], w)
		}
	}
	// the second round trip: one touch, one steady call of ten beats, one
	// status call of three users
	if trips := g.tripsFrom(before); !reflect.DeepEqual(trips, []string{"beat", "touch+beat+status"}) {
		t.Fatalf("round trips %v, want [beat touch+beat+status]", trips)
	}
	if n := beatsOf(calls[1], users[1:]...); n != 10 {
		t.Errorf("the steady call carried %d beats, want 10", n)
	}
}

// TestGroupCommitResultsAsSingleCalls: every caller of a combined batch
// gets what its call alone would have returned: tokens, refusals, input
// errors, statuses, in the order the calls queued.
func TestGroupCommitResultsAsSingleCalls(t *testing.T) {
	ctx := context.Background()
	users := []string{"a", "b", "c", "d", "e", "f", "g"}
	type call struct {
		name string
		do   func(e *core.Engine, tokens map[string]string) string
	}
	hb := func(u, dev string, tok func(map[string]string) string, bg bool) func(*core.Engine, map[string]string) string {
		return func(e *core.Engine, tokens map[string]string) string {
			ack, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: dev, Kind: core.KindWeb, Token: tok(tokens), Active: true, Background: bg})
			return fmt.Sprintf("token=%q changes=%v err=%v", ack.Token, ack.Changes, err)
		}
	}
	own := func(u string) func(map[string]string) string { return func(t map[string]string) string { return t[u] } }
	fixed := func(s string) func(map[string]string) string { return func(map[string]string) string { return s } }
	calls := []call{
		{"a", hb("a", "d", own("a"), false)},
		{"b stale token", hb("b", "d", fixed("stale"), false)},
		{"c", hb("c", "d", own("c"), false)},
		{"c again", hb("c", "d", own("c"), true)},
		{"d background", hb("d", "d", own("d"), true)},
		{"e second device", hb("e", "tablet", fixed("tok-e2"), false)},
		{"status f", func(e *core.Engine, _ map[string]string) string {
			st, err := e.Status(ctx, "f")
			return fmt.Sprintf("%+v err=%v", st, err)
		}},
		{"status nobody", func(e *core.Engine, _ map[string]string) string {
			st, err := e.Status(ctx, "nobody")
			return fmt.Sprintf("%+v err=%v", st, err)
		}},
		{"login g", func(e *core.Engine, _ map[string]string) string {
			r, err := e.Login(ctx, core.Login{User: "g", Device: "d2", Kind: core.KindWeb, Token: "tok-g2"})
			return fmt.Sprintf("%+v err=%v", r, err)
		}},
	}
	// alone: one after another, without group commit
	solo, _, _ := newGateEngine(t, core.Config{GroupCommit: -1, UserBuckets: 2})
	tokens := loginAll(t, solo, users...)
	want := make([]string, len(calls))
	for i, c := range calls {
		want[i] = c.do(solo, tokens)
	}
	// combined: all queued behind one call, then in one batch
	e, g, _ := newGateEngine(t, core.Config{GroupCommit: 1, UserBuckets: 2})
	tokens = loginAll(t, e, users...)
	before := g.tripCount()
	g.setHold(true)
	done := make(chan struct{})
	go func() {
		if _, err := e.Status(ctx, "a"); err != nil {
			t.Error(err)
		}
		close(done)
	}()
	<-g.entered
	got := make([]string, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = c.do(e, tokens)
		}()
		waitQueued(t, e, i+1)
	}
	g.setHold(false)
	g.release <- struct{}{}
	<-done
	wg.Wait()
	for i := range calls {
		if got[i] != want[i] {
			t.Errorf("%s: combined %s\nalone %s", calls[i].name, got[i], want[i])
		}
	}
	// the leader's status; the batch's first round (the login, a steady
	// call per bucket, a status call per bucket, each steady call deciding
	// the beats it cannot apply); the acknowledgement of what one bucket's
	// beats published; c's two beats, left to the full path; the
	// acknowledgement of what they published
	want2 := []string{"status", "login+beat+beat+status+status", "outbox_ack", "heartbeat", "outbox_ack"}
	if trips := g.tripsFrom(before); !reflect.DeepEqual(trips, want2) {
		t.Errorf("round trips %v, want %v", trips, want2)
	}
}

// TestGroupCommitCancelledWhileQueued: a caller that gives up while its
// call waits returns its context's error, and its call is never sent.
func TestGroupCommitCancelledWhileQueued(t *testing.T) {
	bg := context.Background()
	e, g, _ := newGateEngine(t, core.Config{GroupCommit: 1, UserBuckets: 1})
	tokens := loginAll(t, e, "u0", "u1", "u2")
	before := g.tripCount()
	g.setHold(true)
	errs := make(chan error, 3)
	beat := func(ctx context.Context, u string) {
		_, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "d", Kind: core.KindWeb, Token: tokens[u]})
		errs <- err
	}
	go beat(bg, "u0")
	<-g.entered
	ctx, cancel := context.WithCancel(bg)
	go beat(ctx, "u1")
	waitQueued(t, e, 1)
	go beat(bg, "u2")
	waitQueued(t, e, 2)
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller: %v, want context.Canceled", err)
	}
	waitQueued(t, e, 1)
	g.setHold(false)
	g.release <- struct{}{}
	for range 2 {
		must(t, <-errs)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, trip := range g.trips[before:] {
		for _, c := range trip {
			for _, a := range c.Args {
				if a == "u1" {
					t.Fatalf("the cancelled beat was sent: %q", c.Args)
				}
			}
		}
	}
	if n := len(g.trips) - before; n != 2 {
		t.Errorf("%d round trips, want 2", n)
	}
}

// TestGroupCommitLeaderGivesUp: a batch leaves without its callers'
// cancellation; callers that give up return at once, the others get their
// outcomes, and a caller handed the lead after it gave up still hands the
// batch on (its own call left out).
func TestGroupCommitLeaderGivesUp(t *testing.T) {
	bg := context.Background()
	t.Run("in flight", func(t *testing.T) {
		e, g, _ := newGateEngine(t, core.Config{GroupCommit: 1, UserBuckets: 1})
		tokens := loginAll(t, e, "u0", "a", "b", "c")
		before := g.tripCount()
		g.setHold(true)
		type res struct {
			u   string
			err error
		}
		out := make(chan res, 4)
		beat := func(ctx context.Context, u string, background bool) {
			_, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "d", Kind: core.KindWeb, Token: tokens[u], Active: true, Background: background})
			out <- res{u, err}
		}
		go beat(bg, "u0", false)
		<-g.entered
		ctxA, cancelA := context.WithCancel(bg)
		ctxB, cancelB := context.WithCancel(bg)
		go beat(ctxA, "a", false)
		waitQueued(t, e, 1)
		go beat(ctxB, "b", true)
		waitQueued(t, e, 2)
		go beat(bg, "c", false)
		waitQueued(t, e, 3)
		g.release <- struct{}{} // u0 is back; a leads a, b and c
		if r := <-out; r.u != "u0" || r.err != nil {
			t.Fatalf("first: %+v", r)
		}
		if calls := <-g.entered; len(calls) != 1 || beatsOf(calls[0], "a", "b", "c") != 3 {
			t.Fatalf("the batch: %d calls", len(calls))
		}
		cancelA()
		cancelB()
		if r := <-out; r.u != "b" || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("b gave up in flight: %+v, want context.Canceled at once", r)
		}
		g.setHold(false)
		g.release <- struct{}{}
		got := map[string]error{}
		for range 2 {
			r := <-out
			got[r.u] = r.err
		}
		if got["c"] != nil || got["a"] != nil {
			t.Errorf("a (the leader, cancelled in flight) %v, c %v: want both applied", got["a"], got["c"])
		}
		g.mu.Lock()
		if g.ctxDone[before+1] {
			t.Errorf("the batch went with a cancelled context")
		}
		g.mu.Unlock()
		st, err := e.Status(bg, "b")
		must(t, err)
		if len(st.Devices) != 1 || !st.Devices[0].Background {
			t.Errorf("b's beat, sent before b gave up, was not applied: %+v", st)
		}
	})
	t.Run("before it leads", func(t *testing.T) {
		// a gives up before or after the lead reaches it: either way its
		// call is not sent, and b's goes
		for range 20 {
			e, g, _ := newGateEngine(t, core.Config{GroupCommit: 1, UserBuckets: 1})
			tokens := loginAll(t, e, "u0", "a", "b")
			before := g.tripCount()
			g.setHold(true)
			errs := map[string]chan error{"u0": make(chan error, 1), "a": make(chan error, 1), "b": make(chan error, 1)}
			beat := func(ctx context.Context, u string) {
				_, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "d", Kind: core.KindWeb, Token: tokens[u]})
				errs[u] <- err
			}
			go beat(bg, "u0")
			<-g.entered
			g.setHold(false)
			ctx, cancel := context.WithCancel(bg)
			go beat(ctx, "a")
			waitQueued(t, e, 1)
			go beat(bg, "b")
			waitQueued(t, e, 2)
			cancel()
			g.release <- struct{}{}
			must(t, <-errs["u0"])
			must(t, <-errs["b"])
			if err := <-errs["a"]; !errors.Is(err, context.Canceled) {
				t.Fatalf("a: %v, want context.Canceled", err)
			}
			if trips := g.tripsFrom(before); !reflect.DeepEqual(trips, []string{"beat", "beat"}) {
				t.Fatalf("round trips %v", trips)
			}
			g.mu.Lock()
			if args := g.trips[before+1][0].Args; beatsOf(g.trips[before+1][0], "a", "b") != 1 || !slices.Contains(args, "b") {
				t.Fatalf("the second round trip carried %q, want b's beat alone", args)
			}
			g.mu.Unlock()
		}
	})
}

// TestGroupCommitErrorsStayPerCall: in a batch, a failed script call fails
// the calls it carried and no other, and a refusal is its beat's alone.
func TestGroupCommitErrorsStayPerCall(t *testing.T) {
	ctx := context.Background()
	e, g, _ := newGateEngine(t, core.Config{GroupCommit: 1, UserBuckets: 2})
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"}
	tokens := loginAll(t, e, users...)
	// the bucket of u1 fails from now on
	slotOf := func(u string) uint16 {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, trip := range g.trips {
			for _, c := range trip {
				if scriptOf(c) == "heartbeat" || scriptOf(c) == "login" {
					for _, a := range c.Args {
						if a == u {
							return slot.Of(c.Keys[0])
						}
					}
				}
			}
		}
		t.Fatalf("no call of %s", u)
		return 0
	}
	down := slotOf("u1")
	bad := fmt.Errorf("bucket down: %w", core.ErrUnavailable)
	var mine, others []string
	for _, u := range users[1:] {
		if slotOf(u) == down {
			mine = append(mine, u)
		} else {
			others = append(others, u)
		}
	}
	if len(others) < 2 {
		t.Fatalf("users %v all in one bucket", users)
	}
	g.mu.Lock()
	g.fail = func(c core.Call) error {
		if slot.Of(c.Keys[0]) == down {
			return bad
		}
		return nil
	}
	g.mu.Unlock()
	g.setHold(true)
	errs := make(chan result, len(users))
	beat := func(u, tok string) {
		_, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "d", Kind: core.KindWeb, Token: tok})
		errs <- result{u, fmt.Sprint(err)}
	}
	go beat("u0", tokens["u0"])
	<-g.entered
	g.setHold(false)
	for i, u := range users[1:] {
		tok := tokens[u]
		if u == others[0] {
			tok = "superseded"
		}
		go beat(u, tok)
		waitQueued(t, e, i+1)
	}
	g.release <- struct{}{}
	got := map[string]string{}
	for range users {
		r := <-errs
		got[r.who] = r.out
	}
	for _, u := range mine {
		if !strings.Contains(got[u], "bucket down") {
			t.Errorf("%s, in the failed call: %s", u, got[u])
		}
	}
	if got[others[0]] != core.ErrSessionReplaced.Error() {
		t.Errorf("%s, superseded: %s", others[0], got[others[0]])
	}
	for _, u := range others[1:] {
		if got[u] != "<nil>" {
			t.Errorf("%s, in a call that went well: %s", u, got[u])
		}
	}
}

// TestGroupCommitConfig: GroupCommit takes -1 (off) to 64.
func TestGroupCommitConfig(t *testing.T) {
	for _, v := range []int{-2, 65} {
		var ie *core.InputError
		if _, err := core.New(shortStore{}, core.Config{GroupCommit: v}); !errors.As(err, &ie) || ie.Field != "Config.GroupCommit" {
			t.Errorf("GroupCommit %d: %v", v, err)
		}
	}
	for _, v := range []int{-1, 0, 1, 64} {
		if _, err := core.New(shortStore{}, core.Config{GroupCommit: v}); err != nil {
			t.Errorf("GroupCommit %d: %v", v, err)
		}
	}
}
