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
)

// planNow is the "now" the machinery tests plan at.
const planNow = "1700000000000"

func testPlanner(t *testing.T, cfg core.Config) *core.Planner {
	t.Helper()
	pl, err := core.NewPlanner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// TestPlanWrongResults: a wrong number of results ends the plan with a
// *StoreError matching ErrPlanResults, and a step after the end is refused.
func TestPlanWrongResults(t *testing.T) {
	pl := testPlanner(t, core.Config{})
	p := planOf[core.LoginResult](pl, planNow, core.Login{User: "u", Device: "d", Kind: core.KindWeb})
	if p.Done() || len(p.Calls()) != 1 {
		t.Fatalf("a login plan starts with one call, got done=%v calls=%d", p.Done(), len(p.Calls()))
	}
	if _, err := p.Outcome(); !errors.Is(err, core.ErrPlanPending) {
		t.Fatalf("outcome before the end: %v, want ErrPlanPending", err)
	}
	err := p.Step(nil)
	var se *core.StoreError
	if !errors.Is(err, core.ErrPlanResults) || !errors.As(err, &se) || se.Op != "login" {
		t.Fatalf("step with no results: %v, want a *StoreError of login matching ErrPlanResults", err)
	}
	if !p.Done() || p.Calls() != nil {
		t.Fatal("the plan did not end")
	}
	if _, err := p.Outcome(); !errors.Is(err, core.ErrPlanResults) {
		t.Fatalf("outcome: %v, want ErrPlanResults", err)
	}
	if err := p.Step([]core.Result{{}}); !errors.Is(err, core.ErrPlanDone) {
		t.Fatalf("step after the end: %v, want ErrPlanDone", err)
	}
}

// TestPlanNoScriptFallback: calls answered NOSCRIPT are resent by source,
// alone, and the plan ends with the merged results.
func TestPlanNoScriptFallback(t *testing.T) {
	pl := testPlanner(t, core.Config{UserBuckets: 4})
	p := planOf[map[core.Status]int64](pl, planNow, core.ReadOnline{})
	calls := p.Calls()
	if len(calls) != 4 {
		t.Fatalf("online: %d calls, want one per bucket (4)", len(calls))
	}
	res := make([]core.Result, len(calls))
	for i := range res {
		res[i].Value = core.Value{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueString, Str: "3"}, {Kind: core.ValueInt, Int: int64(i + 1)}}} // i+1 ONLINE
	}
	res[1] = core.Result{Err: fmt.Errorf("%w: no such script", core.ErrNoScript)}
	res[3] = core.Result{Err: core.ErrNoScript}
	if err := p.Step(res); err != nil || p.Done() {
		t.Fatalf("after NOSCRIPT: err %v done %v", err, p.Done())
	}
	again := p.Calls()
	if len(again) != 2 {
		t.Fatalf("resent %d calls, want 2", len(again))
	}
	for j, i := range []int{1, 3} {
		if again[j].SHA != "" || again[j].Source == "" || !reflect.DeepEqual(again[j].Keys, calls[i].Keys) {
			t.Fatalf("resend %d: %+v, want call %d by source", j, again[j], i)
		}
		if s := scriptOf(again[j]); s != "counts" {
			t.Fatalf("resend %d runs %q, want counts", j, s)
		}
	}
	err := p.Step([]core.Result{
		{Value: core.Value{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueString, Str: "3"}, {Kind: core.ValueInt, Int: 20}}}},
		{Value: core.Value{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueString, Str: "3"}, {Kind: core.ValueInt, Int: 40}}}},
	})
	if err != nil || !p.Done() {
		t.Fatalf("after the resend: err %v done %v", err, p.Done())
	}
	got, err := p.Outcome()
	if err != nil || got[core.StatusOnline] != 1+20+3+40 {
		t.Fatalf("outcome %v %v, want 64 online", got, err)
	}
}

// TestPlanErrorResult: a result's error ends the plan with a *StoreError
// naming the operation; an unreachable Redis matches ErrUnavailable.
func TestPlanErrorResult(t *testing.T) {
	pl := testPlanner(t, core.Config{})
	p := planOf[core.UserStatus](pl, planNow, core.ReadStatus{"u"})
	down := fmt.Errorf("%w: connection refused", core.ErrUnavailable)
	if err := p.Step([]core.Result{{Err: down}}); err != nil {
		t.Fatalf("step: %v (a result's error is the outcome's, not Step's)", err)
	}
	_, err := p.Outcome()
	var se *core.StoreError
	if !p.Done() || !errors.As(err, &se) || se.Op != "status" || !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, down) {
		t.Fatalf("outcome %v, want a *StoreError of status matching ErrUnavailable", err)
	}
	if len(p.Messages()) != 0 {
		t.Fatal("a failed plan publishes nothing")
	}
}

// TestPlanInvalidInput: a plan refused before its first call is born ended.
func TestPlanInvalidInput(t *testing.T) {
	pl := testPlanner(t, core.Config{})
	p := planOf[core.Ack](pl, planNow, core.Heartbeat{User: "", Device: "d"})
	if !p.Done() || p.Calls() != nil {
		t.Fatal("an invalid heartbeat's plan must end at once")
	}
	if _, err := p.Outcome(); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("outcome %v, want ErrInvalid", err)
	}
}

// TestPlanSteadyFallsThrough: a beat the steady script leaves goes on to
// the full path, whose change is appended to the change log before the plan
// ends with the message to publish.
func TestPlanSteadyFallsThrough(t *testing.T) {
	pl := testPlanner(t, core.Config{ChangeLog: 100, Rand: rand.NewChaCha8([32]byte{})})
	p := planOf[core.Ack](pl, planNow, core.Heartbeat{User: "u", Device: "d", Kind: core.KindWeb})
	if s := scriptOf(p.Calls()[0]); s != "beat" {
		t.Fatalf("first call runs %q, want beat", s)
	}
	must(t, p.Step([]core.Result{{Value: core.Value{Kind: core.ValueString, Str: ""}}})) // left to the full path
	c := p.Calls()
	if len(c) != 1 || scriptOf(c[0]) != "heartbeat" {
		t.Fatalf("second round %v, want the full heartbeat", c)
	}
	issued := c[0].Args[len(c[0].Args)-1]
	results := core.Value{Kind: core.ValueArray, Array: []core.Value{core.Value{Kind: core.ValueString, Str: ""}, core.Value{Kind: core.ValueString, Str: issued}, core.Value{Kind: core.ValueInt, Int: 0}, core.Value{Kind: core.ValueInt, Int: 3}, core.Value{Kind: core.ValueString, Str: "u4.1700000000000.1"}, core.Value{Kind: core.ValueString, Str: ""}}}
	must(t, p.Step([]core.Result{{Value: core.Value{Kind: core.ValueArray, Array: []core.Value{core.Value{Kind: core.ValueInt, Int: 1_700_000_000_000}, results, core.Value{Kind: core.ValueString, Str: ""}}}}}))
	if c := p.Calls(); len(c) != 1 || scriptOf(c[0]) != "log_append" || p.Done() {
		t.Fatalf("third round %v, want the change log append", c)
	}
	must(t, p.Step([]core.Result{{Value: core.Value{Kind: core.ValueString, Str: "1-0"}}}))
	ack, err := p.Outcome()
	if err != nil || ack.Token != issued || len(ack.Changes) != 1 || ack.Changes[0].To != core.StatusOnline {
		t.Fatalf("outcome %+v %v", ack, err)
	}
	if m := p.Messages(); len(m) != 1 || m[0].Kind != "change" || m[0].Channel != "presence:changes" || m[0].ID != "u4.1700000000000.1" {
		t.Fatalf("messages %+v, want one change", m)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// countingStore counts the round trips (Eval calls) and the calls in them.
type countingStore struct {
	inner core.Store
	mu    sync.Mutex
	trips int
	calls int
}

func (c *countingStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	c.mu.Lock()
	c.trips++
	c.calls += len(calls)
	c.mu.Unlock()
	return c.inner.Eval(ctx, calls)
}

// runRig is an engine over its own miniredis, with a counting store, a
// fixed clock and a seeded token source.
type runRig struct {
	e     *core.Engine
	mr    *miniredis.Miniredis
	store *countingStore
}

func newRunRig(t *testing.T, cfg core.Config, warm bool) *runRig {
	t.Helper()
	mr := miniredis.RunT(t)
	clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
	mr.SetTime(clk.t)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	if warm {
		for _, sc := range luascripts.All() {
			if err := c.ScriptLoad(context.Background(), sc.Source()).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	store := &countingStore{inner: goredis.New(c)}
	cfg.Clock = clk.Now
	cfg.Rand = rand.NewChaCha8([32]byte{7})
	e, err := core.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &runRig{e: e, mr: mr, store: store}
}

// outcome is a plan's outcome and messages, formatted for comparison.
type outcome interface {
	core.Stepper
	result() string
}

type typed[T any] struct{ core.Plan[T] }

func (p typed[T]) result() string {
	v, err := p.Outcome()
	return fmt.Sprintf("%+v err=%v msgs=%d", v, err, len(p.Messages()))
}

func wrapPlan[T any](p core.Plan[T]) outcome { return typed[T]{p} }

type errOnly[T any] struct{ core.Plan[T] }

func (p errOnly[T]) result() string {
	_, err := p.Outcome()
	return fmt.Sprintf("err=%v", err)
}

// manyPlans makes 200 plans of every kind of operation, on users and
// scopes of their own so that their order within a round does not matter,
// and the reads on data that setUp wrote.
func manyPlans(pl *core.Planner, now string) []outcome {
	var out []outcome
	for i := range 200 {
		u := fmt.Sprintf("u%d", i)
		room := core.Scope{Class: "room", ID: fmt.Sprintf("r%d", i)}
		video := core.Scope{Class: "video", ID: fmt.Sprintf("v%d", i)}
		switch i % 20 {
		case 0, 1, 2:
			out = append(out, wrapPlan(planOf[core.Ack](pl, now, core.Heartbeat{User: u, Device: "d", Kind: core.KindWeb})))
		case 3:
			out = append(out, wrapPlan(planOf[core.Ack](pl, now, core.Heartbeat{User: "old" + fmt.Sprint(i), Device: "d", Token: "nosuch", Kind: core.KindWeb})))
		case 4:
			out = append(out, wrapPlan(planOf[core.LoginResult](pl, now, core.Login{User: u, Device: "phone", Kind: core.KindAndroid, Gateway: "gw1"})))
		case 5: // kicks the device setUp logged in
			exclusive := core.PolicyExclusive
			out = append(out, wrapPlan(planOf[core.LoginResult](pl, now, core.Login{User: fmt.Sprint("k", i), Device: "new", Kind: core.KindWeb, Gateway: "gw1", Policy: &exclusive})))
		case 6:
			out = append(out, wrapPlan(planOf[[]core.Ack](pl, now, core.HeartbeatBatch([]core.Heartbeat{
				{User: u, Device: "a", Kind: core.KindWeb}, {User: u + "x", Device: "b", Kind: core.KindDesktop},
				{User: u, Device: "a", Kind: core.KindWeb, Active: true}}))))
		case 7:
			out = append(out, wrapPlan(planOf[core.UserStatus](pl, now, core.ReadStatus{"pre" + fmt.Sprint(i%5)})))
		case 8:
			out = append(out, wrapPlan(planOf[[]core.UserStatus](pl, now, core.ReadStatuses{[]string{"pre0", "pre1", "pre2", "nobody"}})))
		case 9:
			out = append(out, wrapPlan(planOf[[]core.Change](pl, now, core.SetManual{u, core.ManualDND, time.Minute})))
		case 10:
			out = append(out, wrapPlan(planOf[struct{}](pl, now, core.ScopeTouch{room, "m" + u})))
		case 11:
			out = append(out, wrapPlan(planOf[struct{}](pl, now, core.TouchBatch([]core.ScopeTouch{{Scope: video, Member: "a"}, {Scope: room, Member: "b"}}))))
		case 12:
			out = append(out, wrapPlan(planOf[core.Count](pl, now, core.ReadCount{core.Scope{Class: "room", ID: "pre"}})))
		case 13:
			out = append(out, wrapPlan(planOf[core.Count](pl, now, core.ReadCount{core.Scope{Class: "video", ID: "pre"}})))
		case 14:
			out = append(out, wrapPlan(planOf[core.MemberPage](pl, now, core.ReadMembers{core.Scope{Class: "room", ID: "pre"}, "", 10})))
		case 15:
			out = append(out, wrapPlan(planOf[int64](pl, now, core.ReadActive{core.Scope{Class: "room", ID: "pre"}, time.Minute})))
		case 16:
			out = append(out, wrapPlan(planOf[core.Ended](pl, now, core.Logout{"pre" + fmt.Sprint(i%3+3), "d", ""})))
		case 17:
			// a read of every bucket's counts: its value depends on where it
			// falls among the other plans' writes, so only its error is compared
			out = append(out, errOnly[map[core.Status]int64]{planOf[map[core.Status]int64](pl, now, core.ReadOnline{})})
		case 18:
			if i%40 == 18 {
				out = append(out, wrapPlan(planOf[core.SweepReport](pl, now, core.SweepUsers{})))
			} else {
				out = append(out, wrapPlan(planOf[core.SweepReport](pl, now, core.SweepScopes{})))
			}
		case 19:
			out = append(out, wrapPlan(planOf[bool](pl, now, core.Leave{core.Scope{Class: "room", ID: "pre2"}, fmt.Sprint("m", i)})))
		}
	}
	return out
}

// setUp writes what the reads of manyPlans read.
func setUp(t *testing.T, e *core.Engine) {
	t.Helper()
	ctx := context.Background()
	for i := range 6 {
		if _, err := e.Login(ctx, core.Login{User: fmt.Sprint("pre", i), Device: "d", Kind: core.KindWeb}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 5; i < 200; i += 20 {
		if _, err := e.Login(ctx, core.Login{User: fmt.Sprint("k", i), Device: "old", Kind: core.KindWeb, Gateway: "gw0"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range []core.Scope{{Class: "room", ID: "pre"}, {Class: "video", ID: "pre"}, {Class: "room", ID: "pre2"}} {
		for _, m := range []string{"a", "b", "c", "m39", "m79"} {
			must(t, e.Touch(ctx, sc, m))
		}
	}
}

// TestRunManyPlans steps 200 plans of every operation at once, their calls
// sent together in one Store.Eval per round, and checks that they end as
// the same plans run one at a time on an identical store do, in far fewer
// round trips: on a Redis that has the scripts (warm) and on one that
// answers NOSCRIPT to the first of each (cold: resends by source join the
// shared rounds).
func TestRunManyPlans(t *testing.T) {
	for _, warm := range []bool{true, false} {
		t.Run(map[bool]string{true: "warm", false: "cold"}[warm], func(t *testing.T) { runManyPlans(t, warm) })
	}
}

func runManyPlans(t *testing.T, warm bool) {
	// changes published at once, so that plans end with messages and log appends
	cfg := core.Config{ChangeLog: 1000, CoalesceWindow: -1, LeaveDelay: -1, Classes: scopeConfigSpread(4, false).Classes}
	ctx := context.Background()
	now := planNow

	one := newRunRig(t, cfg, warm)
	setUp(t, one.e)
	trips0, calls0 := one.store.trips, one.store.calls
	seq := manyPlans(one.e.Planner(), now)
	for _, p := range seq {
		one.e.Run(ctx, p) // plans are made before any runs, in the same order as below
	}
	seqTrips, seqCalls := one.store.trips-trips0, one.store.calls-calls0

	many := newRunRig(t, cfg, warm)
	setUp(t, many.e)
	trips0, calls0 = many.store.trips, many.store.calls
	par := manyPlans(many.e.Planner(), now)
	steppers := make([]core.Stepper, len(par))
	for i, p := range par {
		steppers[i] = p
	}
	many.e.Run(ctx, steppers...)
	parTrips, parCalls := many.store.trips-trips0, many.store.calls-calls0

	kicks := 0
	for i := range par {
		for _, m := range par[i].Messages() {
			if m.Kind == "kick" {
				kicks++
			}
		}
		if !par[i].Done() {
			t.Fatalf("plan %d did not end", i)
		}
		if a, b := seq[i].result(), par[i].result(); a != b {
			t.Errorf("plan %d:\n one at a time: %s\n together:      %s", i, a, b)
		}
	}
	// the change log holds the same entries, in the order their plans
	// ended: compare its length, and the rest of the stores whole
	for _, mr := range []*miniredis.Miniredis{one.mr, many.mr} {
		entries, err := mr.Stream("presence:log")
		n := len(entries)
		if err != nil || n == 0 {
			t.Fatalf("change log: %d entries, %v", n, err)
		}
		t.Logf("change log: %d entries", n)
		mr.Del("presence:log")
	}
	if a, b := one.mr.Dump(), many.mr.Dump(); a != b {
		t.Errorf("the stores differ:\none at a time:\n%s\ntogether:\n%s", a, b)
	}
	if kicks == 0 {
		t.Error("no plan published a kick")
	}
	t.Logf("200 plans: one at a time %d calls in %d round trips; together %d calls in %d round trips",
		seqCalls, seqTrips, parCalls, parTrips)
	if parTrips*10 > parCalls {
		t.Errorf("%d round trips for %d calls: the plans did not share them", parTrips, parCalls)
	}
}

// cancellingStore cancels its context once its cancelAfter-th round trip
// of sweep steps is back, and records each later round trip's scripts and
// whether its context had ended.
type cancellingStore struct {
	inner       core.Store
	cancel      context.CancelFunc
	cancelAfter int
	sweeps      int
	after       []string
}

func (s *cancellingStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	if s.sweeps >= s.cancelAfter {
		s.after = append(s.after, fmt.Sprintf("%s×%d cancelled=%v", scriptOf(calls[0]), len(calls), ctx.Err() != nil))
	}
	res := s.inner.Eval(ctx, calls)
	if scriptOf(calls[0]) == "sweep_users" {
		if s.sweeps++; s.sweeps == s.cancelAfter {
			s.cancel()
		}
	}
	return res
}

// TestSweepAbortedBetweenSteps: when the context ends between a sweep's
// bucket rounds, Engine's driver and Run both stop the pass, release its
// locks without the context's cancellation, and return the context's
// error with the report so far.
func TestSweepAbortedBetweenSteps(t *testing.T) {
	for _, viaRun := range []bool{false, true} {
		t.Run(map[bool]string{false: "drive", true: "Run"}[viaRun], func(t *testing.T) {
			cfg := core.Config{SweepBatch: 2, UserBuckets: 1}
			e, clk, mr := newMiniEngine(t, cfg)
			bg := context.Background()
			for i := range 10 {
				// metadata too long for a page: each user is indexed on
				// its own, so that the pass takes several steps
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
			store := &cancellingStore{inner: goredis.New(c), cancel: cancel, cancelAfter: 1}
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
			if !errors.Is(err, context.Canceled) || r.Steps != 1 {
				t.Fatalf("sweep: %+v, %v; want one step and context.Canceled (after: %v)", r, err, store.after)
			}
			if want := []string{"unlock×1 cancelled=false"}; !reflect.DeepEqual(store.after, want) {
				t.Fatalf("after the first step: %v, want %v", store.after, want)
			}
		})
	}
}

// shortStore returns one result fewer than it was sent calls.
type shortStore struct{}

func (shortStore) Eval(_ context.Context, calls []core.Call) []core.Result {
	return make([]core.Result, len(calls)-1)
}

// TestRunStoreBreaksContract: when the store returns a wrong number of
// results for a shared round, every plan of the round ends with
// ErrPlanResults.
func TestRunStoreBreaksContract(t *testing.T) {
	e, err := core.New(shortStore{}, core.Config{})
	must(t, err)
	pl := e.Planner()
	a, b := planOf[core.UserStatus](pl, planNow, core.ReadStatus{"a"}), planOf[map[core.Status]int64](pl, planNow, core.ReadOnline{})
	e.Run(context.Background(), a, b)
	_, errA := a.Outcome()
	_, errB := b.Outcome()
	if !errors.Is(errA, core.ErrPlanResults) || !errors.Is(errB, core.ErrPlanResults) {
		t.Fatalf("outcomes: %v; %v; want ErrPlanResults", errA, errB)
	}
}

// bigMeta is metadata too long for a user's record to fit a page
// (lua/recordlib.lua): such a user lives in the bucket's big hash and has
// its own entry in the due index.
var bigMeta = map[string]string{"note": strings.Repeat("m", 64)}

// TestSteadyCallsSplitEvenly: the steady beats of one bucket that one call
// cannot carry go in calls as even as can be, since each call decides up to
// the same number of the beats it cannot apply (LEFT_MAX): two calls of 32
// for 64 beats, not 62 and 2.
func TestSteadyCallsSplitEvenly(t *testing.T) {
	pl := testPlanner(t, core.Config{UserBuckets: 1})
	for _, n := range []int{core.SteadyChunk, core.SteadyChunk + 2, 2*core.SteadyChunk - 1} {
		beats := make(core.HeartbeatBatch, n)
		for i := range beats {
			beats[i] = core.Heartbeat{User: fmt.Sprintf("user%04d", i), Device: "web", Kind: core.KindWeb, Token: "t"}
		}
		calls := pl.Plan(beats, time.UnixMilli(1_700_000_000_000)).Calls()
		k := (n + core.SteadyChunk - 1) / core.SteadyChunk
		var sizes []int
		for _, c := range calls {
			users := 0
			for _, a := range c.Args {
				if strings.HasPrefix(a, "user") {
					users++
				}
			}
			sizes = append(sizes, users)
		}
		if len(sizes) != k || slices.Max(sizes)-slices.Min(sizes) > 1 {
			t.Errorf("%d steady beats in one bucket: calls of %v beats; want %d calls as even as can be", n, sizes, k)
		}
	}
}
