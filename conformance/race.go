package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

// RaceReport is the outcome of a race run.
type RaceReport struct {
	// Targets are the targets whose adapters the workers used.
	Targets []string
	// Rounds counts the histories recorded and checked; Ops their
	// operations; Partitions the per-user and per-scope histories the
	// linearizability checker proved linearizable; Unknown those it gave up
	// on within its time limit (not failures, but reported).
	Rounds, Ops, Partitions, Unknown int
	// Duration is the wall time of the run.
	Duration time.Duration
	// Seed seeds the workload's choices.
	Seed int64
	// Property names the property that failed, and Failure shows the
	// operations involved; both empty when the run passed.
	Property, Failure string
	// Err is set when the run could not start.
	Err error
}

// Passed reports whether the race run ran and passed.
func (r RaceReport) Passed() bool { return r.Err == nil && r.Failure == "" }

// Summary is a one-line account of the report.
func (r RaceReport) Summary() string {
	name := "race [" + strings.Join(r.Targets, ", ") + "]"
	switch {
	case r.Err != nil:
		return fmt.Sprintf("%s: ERROR %v", name, r.Err)
	case r.Failure != "":
		return fmt.Sprintf("%s: FAIL (%s) in round %d, seed %d", name, r.Property, r.Rounds, r.Seed)
	}
	return fmt.Sprintf("%s: PASS %d histories (%d operations, %d partitions linearizable, %d undecided) in %v, seed %d",
		name, r.Rounds, r.Ops, r.Partitions, r.Unknown, r.Duration.Round(time.Millisecond), r.Seed)
}

// Users, devices and scopes of the race workload. Steady users only ever
// heartbeat after their first login, so that their devices must never be
// missing; churn users are logged in and out, kicked and replaced by
// several workers at once.
var (
	raceSteady  = []string{"s1", "s2"}
	raceChurn   = []string{"c1", "c2", "c3"}
	raceDevices = []struct {
		id   string
		kind core.Kind
	}{{"w", core.KindWeb}, {"m", core.KindIOS}, {"p", core.KindDesktop}}
	raceScopes = []core.Scope{{Class: "ex", ID: "r1"}, {Class: "cp", ID: "v1"}, {Class: "ap", ID: "a1"}}
	// steadyMember is touched in every scope by its own worker;
	// earlyMember only at the start of a round, so that it expires and is
	// swept while the others still come and go.
	steadyMember = "sm"
	earlyMember  = "em"
	raceMembers  = []string{"m1", "m2", "m3", "m4", "m5", "m6"}
	raceWindow   = 2 * time.Second
)

// raceConfig is the configuration of a round: short windows so that
// devices and members expire within a round, one bucket of each kind so
// that a sweep's lock covers everything, small sweep steps so that passes
// take several steps and sweepers meet each other's locks, and key
// lifetimes longer than a round (the server keeps wall-clock time).
func raceConfig(prefix string, policy core.Policy) core.Config {
	return core.Config{
		Prefix: prefix,
		Intervals: map[core.Kind]time.Duration{
			core.KindWeb: time.Second, core.KindDesktop: time.Second, core.KindOther: time.Second,
			core.KindIOS: 2 * time.Second, core.KindAndroid: 2 * time.Second,
		},
		IdleAfter:      1500 * time.Millisecond,
		PushWindow:     4 * time.Second,
		LeaveDelay:     500 * time.Millisecond,
		CoalesceWindow: 200 * time.Millisecond,
		KeyGrace:       graceWall,
		MaxDevices:     3,
		MaxSkew:        time.Minute,
		Policy:         policy,
		UserBuckets:    1,
		ScopeBuckets:   1,
		Classes: map[string]core.ScopeClass{
			"ex": {Layout: core.LayoutExact, Window: raceWindow, SweepInterval: time.Millisecond},
			// ShardSize 1: the scope splits and merges among few members
			"cp": {Layout: core.LayoutCompact, Window: raceWindow, SweepInterval: time.Millisecond, ShardSize: 1},
			"ap": {Layout: core.LayoutApprox, Window: raceWindow, SweepInterval: time.Millisecond, Bucket: 200 * time.Millisecond},
		},
		SweepBatch:     3,
		SweepBudget:    8,
		ReleaseAfter:   2,
		CountTTL:       graceWall,
		LastGoodCounts: -1,
	}
}

// deviceWindow is how long a device of the race configuration stays alive
// after a heartbeat.
func deviceWindow(kind core.Kind, bg bool) time.Duration {
	switch {
	case bg:
		return 4 * time.Second
	case kind == core.KindIOS || kind == core.KindAndroid:
		return 4 * time.Second
	}
	return 2 * time.Second
}

// Sizes of a round.
const (
	raceOpsPerWorker = 40
	raceCheckTimeout = 20 * time.Second
)

// CheckRace runs the race suite: rounds in which goroutines heartbeat, log
// in and out, touch and leave scopes, sweep and read at once, through the
// targets' adapters in turn, until opts.RaceDuration has passed. Each
// round's history is checked for the safety properties of docs/design.md
// §7, §8 and §10 and for linearizability against the model, one user or scope
// at a time. The targets must share one server that keeps wall-clock time.
func CheckRace(ctx context.Context, targets []Target, opts Options) RaceReport {
	opts = opts.withDefaults()
	start := time.Now()
	rep := RaceReport{Seed: opts.Seed}
	var bes []*Backend
	defer func() {
		for _, be := range bes {
			be.Close()
		}
	}()
	for _, tg := range targets {
		rep.Targets = append(rep.Targets, tg.Name)
		be, err := tg.Open(ctx)
		if err != nil {
			rep.Err = err
			return rep
		}
		bes = append(bes, be)
		if err := ping(ctx, be.Store); err != nil {
			rep.Err = fmt.Errorf("conformance: %s: %w", tg.Name, err)
			return rep
		}
		if be.virtual() {
			rep.Err = fmt.Errorf("conformance: race suite needs a server with wall-clock time; %s moves with the suite's clock", tg.Name)
			return rep
		}
	}
	if len(bes) == 0 {
		rep.Err = fmt.Errorf("conformance: race suite without targets")
		return rep
	}
	if opts.Cleanup {
		defer cleanup(context.WithoutCancel(ctx), bes[0].Store, opts.Prefix)
	}
	rng := rand.New(rand.NewPCG(uint64(opts.Seed), 0x7ace))
	for ctx.Err() == nil && (rep.Rounds == 0 || time.Since(start) < opts.RaceDuration) {
		r := &round{n: rep.Rounds, opts: opts, targets: targets, bes: bes, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))}
		err := r.run(ctx)
		rep.Rounds++
		rep.Ops += len(r.hist)
		if err != nil {
			rep.Err = err
			break
		}
		if f := r.check(); f != nil {
			rep.Property, rep.Failure = f.property, f.text
			break
		}
		rep.Partitions += r.partitions
		rep.Unknown += r.unknown
		if rep.Rounds%20 == 0 {
			opts.progress("race: %d rounds, %d operations", rep.Rounds, rep.Ops)
		}
	}
	rep.Duration = time.Since(start)
	return rep
}

// tolerance bounds an approximate count's error in the round: the loosest
// of its backends'.
func (r *round) tolerance(exact int64) int64 {
	t := redisTolerance(exact)
	for _, be := range r.bes {
		t = max(t, be.tolerance(exact))
	}
	return t
}

// round is one recorded history.
type round struct {
	n       int
	opts    Options
	targets []Target
	bes     []*Backend
	rng     *rand.Rand
	cfg     core.Config
	x       *runner

	start time.Time
	clock struct {
		sync.Mutex
		ms int64
	}
	mu   sync.Mutex
	hist []*raceOp
	toks map[string]*devTokens

	events              []core.Event // read back through the subscription
	partitions, unknown int
}

// devTokens are the tokens one device was handed, as its client knows them.
type devTokens struct {
	cur string
	old []string
}

// worker is one goroutine of a round, with an engine of its own on one of
// the targets' adapters.
type worker struct {
	r       *round
	id      int
	adapter string
	eng     *core.Engine
	clk     *frozenClock
	rng     *rand.Rand
	caching bool // the store reads counts through a client-side cache
}

func (r *round) newWorker(id int) (*worker, error) {
	i := id % len(r.bes)
	w := &worker{r: r, id: id, adapter: r.targets[i].Adapter, clk: &frozenClock{},
		rng: rand.New(rand.NewPCG(r.rng.Uint64(), uint64(id)))}
	cfg := r.cfg
	cfg.Clock = w.clk.Now
	store := r.bes[i].Store
	if st, ok := store.(interface{ Caching() bool }); ok && st.Caching() {
		w.caching = true
	}
	if r.opts.Wrap != nil {
		store = r.opts.Wrap(store)
	}
	p, err := r.bes[i].newPresence(store, cfg)
	if err != nil {
		return nil, err
	}
	eng, ok := p.(*core.Engine)
	if !ok {
		return nil, fmt.Errorf("conformance: race suite needs *core.Engine targets, %s builds %T", r.targets[i].Name, p)
	}
	w.eng = eng
	return w, nil
}

// tick takes the instant of the next operation: the shared virtual clock
// moves by a few milliseconds for each.
func (r *round) tick(rng *rand.Rand) int64 {
	r.clock.Lock()
	defer r.clock.Unlock()
	r.clock.ms += 3 + rng.Int64N(13)
	return r.clock.ms
}

// do runs o on the worker's engine at the next instant and records it.
func (w *worker) do(ctx context.Context, o *raceOp) *raceOp {
	o.client, o.adapter = w.id, w.adapter
	if c, ok := o.op.(core.ReadCount); ok {
		o.cached = w.caching && layoutOf(c.Scope.Class) == core.LayoutCompact
	}
	o.now = w.r.tick(w.rng)
	w.clk.ms.Store(o.now)
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	o.call = time.Since(w.r.start).Nanoseconds()
	o.exec(ctx, w.eng)
	o.ret = time.Since(w.r.start).Nanoseconds()
	w.r.mu.Lock()
	o.id = len(w.r.hist)
	w.r.hist = append(w.r.hist, o)
	w.r.learn(o)
	w.r.mu.Unlock()
	return o
}

// learn updates the devices' tokens from an operation's outcome (r.mu held).
func (r *round) learn(o *raceOp) {
	set := func(user, dev, token string) {
		t := r.tok(user, dev)
		if t.cur != token {
			if t.cur != "" {
				t.old = append(t.old, t.cur)
			}
			t.cur = token
		}
	}
	if l, ok := o.op.(core.Login); ok && o.err == nil {
		set(l.User, l.Device, as[core.LoginResult](o.out).Token)
	}
	beats := o.beats()
	for i, a := range o.acks() {
		if a.Err == nil {
			set(beats[i].User, beats[i].Device, a.Token)
		}
	}
}

func (r *round) tok(user, dev string) *devTokens {
	k := user + "/" + dev
	t := r.toks[k]
	if t == nil {
		t = &devTokens{}
		r.toks[k] = t
	}
	return t
}

func (r *round) token(user, dev string, old bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tok(user, dev)
	if old {
		if len(t.old) == 0 {
			return bogusToken
		}
		return t.old[len(t.old)-1]
	}
	return t.cur
}

// run records one round: the workload, then a quiet end in which the clock
// jumps past every window and sweeps settle everyone, then the events read
// back through a subscription.
func (r *round) run(ctx context.Context) error {
	policy := []core.Policy{core.PolicyExclusive, core.PolicyExclusivePerKind, core.PolicyMulti}[r.n%3]
	prefix := r.opts.Prefix + "-race-" + strconv.Itoa(r.n)
	r.cfg = raceConfig(prefix, policy)
	r.clock.ms = seqT0.UnixMilli()
	r.x = &runner{ctx: ctx, t0: seqT0, clock: newClock(seqT0), book: newBook()}
	r.toks = map[string]*devTokens{}

	roles := []func(context.Context, *worker){steadyWorker, churnWorker, churnWorker, churnWorker, scopeWorker, readWorker, sweepWorker, sweepWorker}
	workers := make([]*worker, len(roles))
	for i := range roles {
		w, err := r.newWorker(i + r.n) // rotate adapters over roles from round to round
		if err != nil {
			return err
		}
		w.id = i
		workers[i] = w
	}
	feedEng := workers[r.n%len(workers)].eng
	var feed *core.Feed
	if _, ok := r.bes[0].Store.(core.Subscriber); ok && !r.opts.NoFeed {
		var err error
		if feed, err = feedEng.Subscribe(ctx, "g1", "g2"); err != nil {
			return fmt.Errorf("conformance: race: subscribe: %w", err)
		}
		defer feed.Close()
	}
	r.start = time.Now()
	var wg sync.WaitGroup
	for i, role := range roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			role(ctx, workers[i])
		}()
	}
	wg.Wait()

	// The quiet end: the clock jumps past every window; a sweep sees
	// everyone offline, and one after LeaveDelay and CoalesceWindow
	// publishes what is still waiting; scope sweeps empty and release the
	// scopes.
	sw := workers[len(workers)-1]
	for _, jump := range []time.Duration{5 * time.Minute, 10 * time.Second} {
		r.clock.Lock()
		r.clock.ms += jump.Milliseconds()
		r.clock.Unlock()
		sw.do(ctx, &raceOp{op: core.SweepUsers{}})
	}
	rd := workers[len(workers)-3]
	for range 3 {
		sw.do(ctx, &raceOp{op: core.SweepScopes{}})
		// Everything has expired and been swept: reads must see nothing.
		for _, sc := range raceScopes {
			rd.do(ctx, &raceOp{op: core.ReadCount{Scope: sc}})
			if sc.Class != "ap" {
				rd.do(ctx, &raceOp{op: core.ReadMembers{Scope: sc, Limit: core.MaxPage}})
			}
		}
	}
	rd.do(ctx, &raceOp{op: core.ReadStatuses{Users: append(append([]string{}, raceSteady...), raceChurn...)}})
	if feed != nil {
		return r.drain(ctx, feed, feedEng)
	}
	return nil
}

// drain reads the round's events back: markers published last on each
// channel, through every user bucket's outbox as the events are
// (markerCalls), end them.
func (r *round) drain(ctx context.Context, feed *core.Feed, eng *core.Engine) error {
	store := r.bes[0].Store
	if _, ok := store.(core.Publisher); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	pending := map[string]int{}
	mark := func(gw, channel string, payload []byte) error {
		calls := markerCalls(keyspace.New(r.cfg.Prefix, r.cfg.UserBuckets, r.cfg.ScopeBuckets), channel, payload)
		for _, res := range store.Eval(ctx, calls) {
			if res.Err != nil {
				return fmt.Errorf("conformance: race: publishing a marker: %w", res.Err)
			}
		}
		pending[gw] = len(calls)
		return nil
	}
	if err := mark("", eng.ChangeChannel(), markerChange()); err != nil {
		return err
	}
	for _, gw := range []string{"g1", "g2"} {
		if err := mark(gw, eng.KickChannel(gw), markerKick(gw)); err != nil {
			return err
		}
	}
	done := func(gw string) {
		if pending[gw]--; pending[gw] <= 0 {
			delete(pending, gw)
		}
	}
	for len(pending) > 0 {
		ev, err := feed.Next(ctx)
		if err != nil {
			return fmt.Errorf("conformance: race: reading the feed: %w", err)
		}
		switch {
		case ev.Change != nil && ev.Change.User == markerUser:
			done("")
		case ev.Kick != nil && ev.Kick.User == markerUser:
			done(ev.Kick.Gateway)
		default:
			r.events = append(r.events, ev)
		}
	}
	return nil
}

// ---- workers

func steadyWorker(ctx context.Context, w *worker) {
	type dev struct {
		user, id string
		kind     core.Kind
	}
	devs := []dev{{"s1", "w", core.KindWeb}, {"s2", "w", core.KindWeb}}
	if w.r.cfg.Policy == core.PolicyExclusivePerKind {
		devs = append(devs, dev{"s1", "m", core.KindIOS})
	}
	for _, d := range devs {
		w.do(ctx, &raceOp{op: core.Login{User: d.user, Device: d.id, Kind: d.kind, Gateway: "g1"}})
	}
	for i := 0; i < raceOpsPerWorker; i++ {
		d := devs[i%len(devs)]
		w.do(ctx, &raceOp{op: core.Heartbeat{User: d.user, Device: d.id, Kind: d.kind,
			Token: w.r.token(d.user, d.id, false), Active: w.rng.IntN(2) == 0}})
	}
}

func churnWorker(ctx context.Context, w *worker) {
	for i := 0; i < raceOpsPerWorker; i++ {
		u := raceChurn[w.rng.IntN(len(raceChurn))]
		d := raceDevices[w.rng.IntN(len(raceDevices))]
		n := w.rng.IntN(100)
		switch {
		case n < 40:
			w.do(ctx, &raceOp{op: core.Heartbeat{User: u, Device: d.id, Kind: d.kind,
				Token: w.r.token(u, d.id, false), Active: w.rng.IntN(3) != 0, Background: w.rng.IntN(8) == 0}})
		case n < 48:
			w.do(ctx, &raceOp{op: core.Heartbeat{User: u, Device: d.id, Kind: d.kind,
				Token: w.r.token(u, d.id, true), Active: true}})
		case n < 53:
			// a gateway's tick: the beats of a user's devices in one batch,
			// each with its token (bogus when it has none).
			var beats core.HeartbeatBatch
			for _, d := range raceDevices[:2] {
				tok := w.r.token(u, d.id, false)
				if tok == "" {
					tok = bogusToken
				}
				beats = append(beats, core.Heartbeat{User: u, Device: d.id, Kind: d.kind, Token: tok, Active: true})
			}
			w.do(ctx, &raceOp{op: beats})
		case n < 70:
			l := core.Login{User: u, Device: d.id, Kind: d.kind, Gateway: []string{"g1", "g2", ""}[w.rng.IntN(3)]}
			if w.rng.IntN(5) == 0 {
				// a retry of a login whose reply was lost: the same token
				l.Token = w.r.token(u, d.id, false)
			}
			if w.rng.IntN(4) == 0 {
				p := []core.Policy{core.PolicyExclusive, core.PolicyExclusivePerKind}[w.rng.IntN(2)]
				l.Policy = &p
			}
			w.do(ctx, &raceOp{op: l})
		case n < 77:
			w.do(ctx, &raceOp{op: core.Logout{User: u, Device: d.id, Token: w.r.token(u, d.id, false)}})
		case n < 84:
			w.do(ctx, &raceOp{op: core.Disconnect{User: u, Device: d.id, Token: w.r.token(u, d.id, false)}})
		case n < 90:
			m := core.SetManual{User: u, Manual: core.Manual(w.rng.IntN(3))}
			if m.Manual != core.ManualNone && w.rng.IntN(2) == 0 {
				m.TTL = time.Duration(300+w.rng.IntN(600)) * time.Millisecond
			}
			w.do(ctx, &raceOp{op: m})
		default:
			w.do(ctx, &raceOp{op: core.ReadStatus{User: u}})
		}
	}
}

func scopeWorker(ctx context.Context, w *worker) {
	for i := 0; i < raceOpsPerWorker; i++ {
		sc := raceScopes[w.rng.IntN(len(raceScopes))]
		if i < 6 {
			w.do(ctx, &raceOp{op: core.TouchBatch{{Scope: raceScopes[i%len(raceScopes)], Member: earlyMember}}})
			continue
		}
		n := w.rng.IntN(100)
		switch {
		case n < 45:
			w.do(ctx, &raceOp{op: core.TouchBatch{{Scope: sc, Member: raceMembers[w.rng.IntN(len(raceMembers))]}}})
		case n < 65:
			var ts core.TouchBatch
			for _, sc := range raceScopes {
				ts = append(ts, core.ScopeTouch{Scope: sc, Member: steadyMember})
			}
			w.do(ctx, &raceOp{op: ts})
		case n < 85 && sc.Class != "ap":
			w.do(ctx, &raceOp{op: core.Leave{Scope: sc, Member: raceMembers[w.rng.IntN(len(raceMembers))]}})
		default:
			ts := make(core.TouchBatch, 2+w.rng.IntN(3))
			for j := range ts {
				ts[j] = core.ScopeTouch{Scope: raceScopes[w.rng.IntN(len(raceScopes))], Member: raceMembers[w.rng.IntN(len(raceMembers))]}
			}
			w.do(ctx, &raceOp{op: ts})
		}
	}
}

func readWorker(ctx context.Context, w *worker) {
	all := append(append([]string{}, raceSteady...), raceChurn...)
	for i := 0; i < raceOpsPerWorker; i++ {
		sc := raceScopes[w.rng.IntN(len(raceScopes))]
		n := w.rng.IntN(100)
		switch {
		case n < 30:
			w.do(ctx, &raceOp{op: core.ReadStatus{User: all[w.rng.IntN(len(all))]}})
		case n < 45:
			w.do(ctx, &raceOp{op: core.ReadStatuses{Users: all}})
		case n < 70:
			w.do(ctx, &raceOp{op: core.ReadCount{Scope: sc}})
		case n < 85 && sc.Class != "ap":
			w.do(ctx, &raceOp{op: core.ReadMembers{Scope: sc, Limit: core.MaxPage}})
		default:
			w.do(ctx, &raceOp{op: core.ReadActive{Scope: sc, Within: time.Duration(200+w.rng.IntN(1800)) * time.Millisecond}})
		}
	}
}

func sweepWorker(ctx context.Context, w *worker) {
	for i := 0; i < raceOpsPerWorker; i++ {
		var op core.Op = core.SweepUsers{}
		if i%2 == 1 {
			op = core.SweepScopes{}
		}
		w.do(ctx, &raceOp{op: op})
	}
}
