package conformance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
	"github.com/presencekit/presence/internal/luascripts"
)

// seqT0 is the first instant of every sequence.
var seqT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// stepTimeout bounds one step on one side.
const stepTimeout = 15 * time.Second

// minConcSteps is how many concurrent steps a run needs before it may
// conclude that group commit never combined calls.
const minConcSteps = 20

// Check runs the model-based sequences on one target and returns what
// happened. It does not run the race suite (see CheckRace). Check is the
// entry point of "presence conform"; tests use Run.
func Check(ctx context.Context, target Target, opts Options) Report {
	opts = opts.withDefaults()
	start := time.Now()
	rep := Report{Target: target.Name, Seed: opts.Seed}
	be, err := target.Open(ctx)
	if err != nil {
		rep.Err = err
		return rep
	}
	defer be.Close()
	if err := ping(ctx, be.Store); err != nil {
		rep.Err = fmt.Errorf("conformance: %s: %w", target.Name, err)
		return rep
	}
	s := &seqSuite{ctx: ctx, target: target, be: be, opts: opts}
	if opts.Cleanup {
		defer cleanup(context.WithoutCancel(ctx), be.Store, opts.Prefix)
	}
	params := gopter.DefaultTestParametersWithSeed(opts.Seed)
	params.MinSuccessfulTests = opts.Sequences
	params.MinSize = 1
	params.MaxSize = opts.MaxSteps + 1 // exclusive
	params.MaxShrinkCount = opts.MaxShrinks
	params.Workers = 1
	res := commands.Prop(s.commands()).Check(params)
	rep.Sequences, rep.Runs, rep.Steps = res.Succeeded, s.runs, s.steps
	rep.Duration = time.Since(start)
	if st, ok := be.Store.(interface{ CacheStats() (uint64, uint64) }); ok {
		rep.CacheHits, rep.CacheMisses = st.CacheStats()
	}
	switch {
	case ctx.Err() != nil:
		rep.Err = ctx.Err()
	case s.openErr != nil:
		rep.Err = s.openErr
	case res.Passed() && s.concSteps >= minConcSteps && s.combinedSteps == 0:
		rep.Property = "group commit combines concurrent calls"
		rep.Failure = fmt.Sprintf("in none of %d concurrent steps did a caller's round trip carry another caller's call", s.concSteps)
	case !res.Passed():
		rep.Property = s.lastFail.property
		rep.Failure = s.lastFail.text
		if rep.Failure == "" {
			rep.Property = "the suite itself"
			rep.Failure = fmt.Sprintf("gopter: %s %v %v", res.Status, res.Error, res.Args)
		}
	}
	return rep
}

// seqSuite runs the sequences of one target.
type seqSuite struct {
	ctx    context.Context
	target Target
	be     *Backend
	opts   Options

	runs, steps int
	openErr     error
	lastFail    failure
	// concSteps counts the concurrent steps run on an engine, and
	// combinedSteps those in which group commit combined calls: the
	// scheduler may let a step's calls leave apart, but never all of a run's
	concSteps, combinedSteps int
}

// failure is the transcript of a failed sequence.
type failure struct{ property, text string }

func (s *seqSuite) commands() commands.Commands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(st commands.State) commands.SystemUnderTest {
			return s.newSystem(st.(seqConfig))
		},
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) { s.finish(sut.(*system)) },
		InitialStateGen: func(p *gopter.GenParameters) *gopter.GenResult {
			return gopter.NewGenResult(randomConfig(p.Rng), gopter.NoShrinker)
		},
		GenCommandFunc: func(st commands.State) gopter.Gen {
			return func(p *gopter.GenParameters) *gopter.GenResult {
				return gopter.NewGenResult(command{st.(seqConfig).nextOp(p.Rng)}, gopter.NoShrinker)
			}
		},
	}
}

// command adapts an op to gopter's commands.Command. Steps have no
// preconditions (any subsequence of a sequence is a sequence), so shrinking
// may drop any of them.
type command struct{ op op }

func (c command) Run(sut commands.SystemUnderTest) commands.Result { return sut.(*system).do(c.op) }
func (c command) NextState(st commands.State) commands.State       { return st }
func (c command) PreCondition(commands.State) bool                 { return true }
func (c command) String() string                                   { return c.op.String() }

func (c command) PostCondition(_ commands.State, r commands.Result) *gopter.PropResult {
	if r.(stepResult).ok {
		return &gopter.PropResult{Status: gopter.PropTrue}
	}
	return &gopter.PropResult{Status: gopter.PropFalse}
}

type stepResult struct{ ok bool }

// system is one sequence's systems under test: the model and the target's
// engine, sharing a clock and a seeded source of tokens.
type system struct {
	s      *seqSuite
	cfg    seqConfig
	x      *runner
	model  *oracle
	engine core.Presence
	store  core.Store // as the engine sees it
	keys   keyspace.Layout
	feed   *core.Feed
	cancel context.CancelFunc
	calls  atomic.Int64 // Eval calls the engine made
	// gate holds a concurrent step's round trips (concOp); nil otherwise
	gate atomic.Pointer[gate]
	// marks are the instants earlier steps set, which edges start from
	marks []time.Time

	n        int
	log      []string
	failed   bool
	property string
}

// seededReader returns the deterministic token source of a sequence.
func seededReader(seed uint64) *rand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return rand.NewChaCha8(key)
}

func (s *seqSuite) newSystem(cfg seqConfig) *system {
	s.runs++
	if s.be.Reset != nil {
		s.be.Reset()
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sys := &system{s: s, cfg: cfg, cancel: cancel,
		x: &runner{ctx: ctx, t0: seqT0, clock: newClock(seqT0), book: newBook()}}
	if s.be.SetTime != nil {
		s.be.SetTime(seqT0)
	}
	prefix := s.prefix()
	ccfg := cfg.config(prefix, s.be.virtual())
	ccfg.Clock = sys.x.clock.Now
	sys.keys = keyspace.New(ccfg.Prefix, ccfg.UserBuckets, ccfg.ScopeBuckets)

	mcfg := ccfg
	mcfg.Clock = nil
	m, err := newOracle(mcfg, cfg.Seed)
	if err != nil {
		sys.fail("configuration", "core.NewModel: "+err.Error())
		return sys
	}
	sys.model = m

	store := s.be.Store
	if s.opts.Wrap != nil {
		store = s.opts.Wrap(store)
	}
	store = Intercept(store, Interceptor{Eval: func(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result {
		sys.calls.Add(int64(len(calls)))
		if g := sys.gate.Load(); g != nil {
			g.enter(ctx, calls)
		}
		return next(ctx, calls)
	}})
	sys.store = store
	ecfg := ccfg
	ecfg.Rand = seededReader(cfg.Seed)
	e, err := s.be.newPresence(store, ecfg)
	if err != nil {
		sys.fail("configuration", "engine: "+err.Error())
		return sys
	}
	sys.engine = e
	if eng, ok := e.(*core.Engine); ok && !s.opts.NoFeed {
		if _, ok := store.(core.Subscriber); ok {
			// The subscription lives as long as ctx: the whole sequence.
			feed, err := eng.Subscribe(ctx, feedGateway...)
			if err != nil {
				sys.fail("events published", "subscribe: "+errName(err))
				return sys
			}
			sys.feed = feed
		}
	}
	return sys
}

// prefix is the key prefix of the current sequence: unique to the run, the
// target and the sequence, so that targets can share a server.
func (s *seqSuite) prefix() string {
	name := strings.NewReplacer("{", "(", "}", ")").Replace(s.target.Name)
	return s.opts.Prefix + "-" + name + "-" + strconv.Itoa(s.runs)
}

func (sys *system) logf(format string, args ...any) {
	sys.log = append(sys.log, fmt.Sprintf(format, args...))
}

func (sys *system) fail(property, why string) {
	sys.failed = true
	sys.property = property
	sys.logf("   ✗ %s: %s", property, why)
}

// do runs one step on the model and the target and compares what they
// observed. After the first divergence the remaining steps are skipped.
func (sys *system) do(o op) stepResult {
	if sys.failed {
		return stepResult{ok: false}
	}
	sys.n++
	sys.s.steps++
	at := sys.x.rel(sys.x.now())
	if a, ok := o.(advanceOp); ok {
		now := sys.x.clock.advance(a.d)
		sys.setClock(now)
		sys.logf("%3d. %-9s %s → now %s", sys.n, at, o, sys.x.rel(now))
		return stepResult{ok: true}
	}
	if e, ok := o.(edgeOp); ok {
		// to the edge first; back to an even instant after (see gen.go's
		// timing): the sweep is the one step at an odd instant
		var state []time.Time
		if e.state {
			state = sys.model.edges(sys.x.now(), sys.cfg.config("", true), e.scopes)
		}
		t := e.edgeTarget(sys.marks, state, sys.x.now(), sys.s.be.virtual())
		sys.setClock(t)
		at = sys.x.rel(t)
		defer func() {
			if t.UnixMilli()%2 != 0 {
				sys.setClock(t.Add(time.Millisecond))
			}
		}()
	} else {
		sys.marks = append(sys.marks, sys.x.now())
		if m, ok := o.(marker); ok {
			sys.marks = append(sys.marks, m.marks(sys.x.now())...)
		}
	}
	ctx, cancel := context.WithTimeout(sys.x.ctx, stepTimeout)
	defer cancel()
	x := *sys.x
	x.ctx = ctx
	before := sys.calls.Load()
	mo := sys.model.run(&x, o)
	xe := x
	var g *gate
	if _, ok := o.(concOp); ok {
		if _, isEngine := sys.engine.(*core.Engine); isEngine {
			g = newGate()
			xe.gate = g
			sys.gate.Store(g)
		}
	}
	eo := o.run(&xe, sys.engine)
	sys.gate.Store(nil)
	sys.x.book.record(mo.issued)
	sys.logf("%3d. %-9s %s\n        → %s", sys.n, at, o, render(mo))
	if ok, why := agree(mo, eo, sys.s.be.tolerance); !ok {
		sys.logf("        target: %s", render(eo))
		sys.fail("agrees with the model: "+opKind(o), why)
		return stepResult{ok: false}
	}
	if g != nil {
		sys.s.concSteps++
		if g.wasCombined() {
			sys.s.combinedSteps++
		}
	}
	if c, ok := o.(call); ok && c.invalid != "" {
		if n := sys.calls.Load() - before; n != 0 {
			sys.fail("rejected input sends nothing", fmt.Sprintf("the engine made %d script calls", n))
			return stepResult{ok: false}
		}
	}
	if sys.feed != nil && len(mo.changes)+len(mo.kicks) > 0 {
		if ok, why := sys.checkFeed(ctx, mo); !ok {
			sys.fail("events published once each: "+opKind(o), why)
			return stepResult{ok: false}
		}
	}
	return stepResult{ok: true}
}

// setClock moves the sequence's clock, and the backend's, to t (not back).
func (sys *system) setClock(t time.Time) {
	if d := t.Sub(sys.x.now()); d > 0 {
		sys.x.clock.advance(d)
	}
	if sys.s.be.SetTime != nil {
		sys.s.be.SetTime(sys.x.now())
	}
}

func render(o obs) string {
	if len(o.approx) == 0 {
		return o.text
	}
	return fmt.Sprintf("%s %v", o.text, o.approx)
}

// opKind names the kind of a step for property names.
func opKind(o op) string {
	s := o.String()
	for _, p := range []string{"heartbeat batch", "touch batch", "count twice", "active within", "sweep users", "sweep scopes",
		"edge sweep users", "edge sweep scopes"} {
		if strings.HasPrefix(s, p) {
			return p
		}
	}
	if i := strings.IndexAny(s, " :"); i > 0 {
		return s[:i]
	}
	return s
}

// markerUser marks the end of a step's events on a channel.
const markerUser = "\x00conformance-marker"

// markerChange and markerKick are the payloads of the markers: a change
// of markerUser, and a kick of its device "-" at gateway gw, in the JSON
// the engine publishes (docs/design.md §7), which a Feed decodes as any
// other, their instants the zero time's.
func markerChange() []byte {
	at := time.Time{}.UnixMilli()
	off := core.StatusOffline.String()
	b, _ := json.Marshal(struct {
		User string `json:"user"`
		From string `json:"from"`
		To   string `json:"to"`
		At   int64  `json:"at"`
	}{markerUser, off, off, at})
	return b
}

func markerKick(gw string) []byte {
	b, _ := json.Marshal(struct {
		User    string `json:"user"`
		Device  string `json:"device"`
		Kind    string `json:"kind"`
		Gateway string `json:"gateway,omitempty"`
		At      int64  `json:"at"`
	}{markerUser, "-", core.KindOther.String(), gw, time.Time{}.UnixMilli()})
	return b
}

// checkFeed reads back, through the subscription, the events the step
// published: exactly the model's changes and kicks, each once. It publishes
// a marker after them on each channel concerned and reads up to the
// markers, so it never waits on a timer.
func (sys *system) checkFeed(ctx context.Context, want obs) (bool, string) {
	if _, ok := sys.store.(core.Publisher); !ok {
		return true, ""
	}
	eng := sys.engine.(*core.Engine)
	// A marker goes out through every user bucket's outbox, as the events
	// do (lua/outbox_ack.lua), so that on a cluster it follows the events
	// of each bucket from the node that published them: once every marker
	// is in, so is every event.
	pending := map[string]int{}
	mark := func(gw, channel string, payload []byte) (bool, string) {
		calls := markerCalls(sys.keys, channel, payload)
		for _, r := range sys.store.Eval(ctx, calls) {
			if r.Err != nil {
				return false, "publishing a marker: " + errName(r.Err)
			}
		}
		pending[gw] = len(calls)
		return true, ""
	}
	if len(want.changes) > 0 {
		if ok, why := mark("", eng.ChangeChannel(), markerChange()); !ok {
			return false, why
		}
	}
	for _, k := range want.kicks {
		gw, _, _ := strings.Cut(k, "|")
		if pending[gw] > 0 {
			continue
		}
		if ok, why := mark(gw, eng.KickChannel(gw), markerKick(gw)); !ok {
			return false, why
		}
	}
	done := func(gw string) {
		if pending[gw]--; pending[gw] <= 0 {
			delete(pending, gw)
		}
	}
	var changes, kicks []string
	for len(pending) > 0 {
		ev, err := sys.feed.Next(ctx)
		if err != nil {
			return false, fmt.Sprintf("reading the feed: %s (got changes %v, kicks %v so far)", errName(err), changes, kicks)
		}
		switch {
		case ev.Change != nil && ev.Change.User == markerUser:
			done("")
		case ev.Kick != nil && ev.Kick.User == markerUser:
			done(ev.Kick.Gateway)
		case ev.Change != nil:
			changes = append(changes, sys.x.change(*ev.Change))
		case ev.Kick != nil:
			kicks = append(kicks, ev.Kick.Gateway+"|"+sys.x.kick(*ev.Kick))
		}
	}
	wc, wk := sorted(want.changes), sorted(want.kicks)
	changes, kicks = sorted(changes), sorted(kicks)
	if strings.Join(wc, ",") != strings.Join(changes, ",") {
		return false, fmt.Sprintf("changes received %v, want %v", changes, wc)
	}
	if strings.Join(wk, ",") != strings.Join(kicks, ",") {
		return false, fmt.Sprintf("kicks received %v, want %v", kicks, wk)
	}
	return true, ""
}

// markerCalls publish payload on channel through each user bucket's
// outbox (lua/outbox_ack.lua, by source, with an epoch no outbox has, so
// that it acknowledges nothing), the engine's keys being keys.
func markerCalls(keys keyspace.Layout, channel string, payload []byte) []core.Call {
	src := luascripts.OutboxAck.Source()
	calls := make([]core.Call, keys.UserBuckets)
	for b := range calls {
		calls[b] = core.Call{Source: src, Keys: []string{keys.Outbox(b)}, Args: []string{"-", "0", channel, string(payload)}}
	}
	return calls
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}

// finish ends a sequence and keeps the transcript of a failure. gopter
// shrinks a failure by running ever smaller failing sequences, so the last
// failure kept is the minimal one.
func (s *seqSuite) finish(sys *system) {
	if sys.feed != nil {
		sys.feed.Close()
	}
	sys.cancel()
	if !sys.failed {
		return
	}
	if sys.property == "configuration" && s.openErr == nil {
		s.openErr = fmt.Errorf("conformance: %s", strings.TrimSpace(sys.log[len(sys.log)-1]))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "target %s, sequence of %d steps, configuration %s (key prefix %s):\n", s.target.Name, sys.n, sys.cfg, s.prefix())
	for _, l := range sys.log {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	s.lastFail = failure{property: sys.property, text: b.String()}
}

// ping checks that the store answers a script at all.
func ping(ctx context.Context, store core.Store) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	res := store.Eval(ctx, []core.Call{{Source: "return 1"}})
	if len(res) != 1 {
		return fmt.Errorf("%d results for one call", len(res))
	}
	return res[0].Err
}

// cleanup deletes the keys under prefix: SCAN MATCH and UNLINK inside a
// script, one page per call, so that it works through any adapter.
func cleanup(ctx context.Context, store core.Store, prefix string) {
	const script = `local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 1000)
for _, k in ipairs(r[2]) do redis.call('UNLINK', k) end
return r[1]`
	cursor := "0"
	for range 1 << 20 {
		ctx, cancel := context.WithTimeout(ctx, stepTimeout)
		res := store.Eval(ctx, []core.Call{{Source: script, Args: []string{cursor, prefix + "*"}}})
		cancel()
		if len(res) != 1 || res[0].Err != nil {
			return
		}
		next := res[0].Value.Str
		if res[0].Value.Kind != core.ValueString || next == "0" {
			return
		}
		cursor = next
	}
}
