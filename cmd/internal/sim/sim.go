package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/host"
)

// The simulated engines' settings beyond the defaults: one user bucket
// and one scope bucket, so that an edge's beats of one tick make one
// script call; video scopes in the compact layout with few shards.
const (
	videoClass  = "video"
	videoWindow = 10 * time.Minute
	videoSweep  = time.Minute
	videoShards = 8
)

// user is one simulated user.
type user struct {
	id     string
	devs   []int32
	dnd    bool        // sets DND now and then
	plan   core.Manual // the manual status the user last asked for
	manual core.Manual // the manual status in force (truth)

	// truth: status since an instant, evaluated up to evalAt
	status core.Status
	since  int64
	evalAt int64
	// pub is the status the engine last published for the user.
	pub core.Status

	watching int32 // video index, or -1
	viaDev   int32 // the device watching
	wgen     uint32
	mark     bool // in the batch being applied
}

// device is one simulated device: the client's state and the truth record.
type device struct {
	idx  int32
	id   string
	user int32
	kind core.Kind
	iv   int64

	online  bool // in a session
	bg      bool // app in the background
	paused  bool // connection lost, reconnecting
	busy    bool // the user interacts
	busyEnd int64
	edge    int
	token   string
	stale   string // the token of a kicked session, for its last heartbeat
	gen     uint32 // session generation: bumping it cancels pending events
	beatGen uint32 // beat generation

	rec record
}

type evKind uint8

const (
	evStart evKind = iota
	evBeat
	evBackground
	evForeground
	evEnd
	evReconnect
	evStale
	evManual
	evTouch
	evWatchEnd
)

// event is something scheduled for a tick.
type event struct {
	kind evKind
	gen  uint32
	id   int32
}

type opKind uint8

const (
	opBeat opKind = iota
	opLogin
	opLogout
	opDisconnect
	opManual
	opTouch
	opLeave
)

// op is an operation an edge sends at the end of the tick.
type op struct {
	kind   opKind
	dev    int32
	user   int32
	video  int32
	hb     core.Heartbeat
	policy *core.Policy
	manual core.Manual
	stale  bool
}

// engine is what an edge runs: core.Engine or host.Engine.
type engine interface {
	core.Presence
	Online(ctx context.Context) (map[core.Status]int64, error)
}

// edge is one edge node.
type edge struct {
	idx   int
	name  string
	up    bool
	p     engine
	store *edgeStore
	close func()
	queue []op
	lives int
}

// world is one run.
type world struct {
	ctx   context.Context
	cfg   Config
	mix   Mix
	rng   *rand.Rand
	ru    rules
	clock *clock
	start int64
	now   int64
	tick  int64 // ms
	ticks int
	k     int // current tick

	users   []user
	devs    []device
	byID    map[string]int32
	videos  []video
	vweight []float64
	wheel   [][]event

	edges   []*edge
	rt      *host.Runtime
	store   *countingStore
	seq     *sequencer
	settleS int64 // how long after a change its publication may lag

	stats Stats
	rows  []Row

	// the last check of the video counts
	lastCounts int64
	viewers    [2]int64 // truth, engine
	countBad   int
	countAge   time.Duration

	viol   []string
	wall0  time.Time
	crashK int
	backK  int
	down   int
}

// clock is the virtual clock every engine reads.
type clock struct{ ms atomic.Int64 }

// Now returns the virtual instant.
func (c *clock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// countingStore counts round trips and script calls that ran. A NOSCRIPT
// answer (the core then resends the script's source) is not counted: how
// many there are depends on which edge's first call reaches a fresh
// server first, and the counts should not.
type countingStore struct {
	inner        core.Store
	trips, calls atomic.Int64
}

// Eval forwards to the inner store.
func (s *countingStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	res := s.inner.Eval(ctx, calls)
	ran := 0
	for _, r := range res {
		if !errors.Is(r.Err, core.ErrNoScript) {
			ran++
		}
	}
	if ran > 0 {
		s.trips.Add(1)
		s.calls.Add(int64(ran))
	}
	return res
}

// sequencer lets the edges, which run their batches at once, reach Redis
// in a fixed order: their WebAssembly work overlaps, their scripts do
// not, so that a run is the same every time (two beats of one user at one
// instant, through two edges, may publish differently in either order).
type sequencer struct {
	mu   sync.Mutex
	cond *sync.Cond
	next int // the ticket whose turn it is
}

func newSequencer() *sequencer {
	s := &sequencer{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *sequencer) wait(ticket int) {
	s.mu.Lock()
	for s.next != ticket {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// turn returns the ticket whose turn it is.
func (s *sequencer) turn() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

func (s *sequencer) done(ticket int) {
	s.mu.Lock()
	s.next = ticket + 1
	s.cond.Broadcast()
	s.mu.Unlock()
}

// edgeStore is an edge's view of the shared store. During a sequenced
// call (ticket ≥ 0) it waits for the ticket's turn before the call's first
// script reaches Redis, and ends the turn as soon as Redis has answered
// (unless the answer is NOSCRIPT: the core resends at once, within the
// turn), so that the edge decodes the answer while the next edge's scripts
// run. The simulated engines make one round trip per batch call.
type edgeStore struct {
	inner   core.Store
	seq     *sequencer
	ticket  int
	holding bool
	done    bool
}

// Eval waits for the turn, if any, and forwards to the shared store.
func (s *edgeStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	if s.ticket < 0 || s.done {
		return s.inner.Eval(ctx, calls)
	}
	if !s.holding {
		s.seq.wait(s.ticket)
		s.holding = true
	}
	res := s.inner.Eval(ctx, calls)
	if !slices.ContainsFunc(res, func(r core.Result) bool { return errors.Is(r.Err, core.ErrNoScript) }) {
		s.seq.done(s.ticket)
		s.done = true
	}
	return res
}

// sequenced runs f as the call of the given ticket.
func (s *edgeStore) sequenced(ticket int, f func()) {
	s.ticket, s.holding, s.done = ticket, false, false
	f()
	if !s.done {
		if !s.holding {
			s.seq.wait(ticket)
		}
		s.seq.done(ticket)
	}
	s.ticket, s.holding, s.done = -1, false, false
}

// Run runs a simulation. The error is for a run that could not be carried
// out (a Redis failure, an invalid configuration); disagreements between
// the engine and the truth are in the result (Result.Err).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &world{ctx: ctx, cfg: cfg, mix: cfg.Mix, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		clock: &clock{}, tick: cfg.Tick.Milliseconds(), wall0: time.Now()}
	w.ru = rules{idle: (5 * time.Minute).Milliseconds(), push: (10 * time.Minute).Milliseconds(),
		leave: (15 * time.Second).Milliseconds(), coalesce: time.Second.Milliseconds(), fence: time.Hour.Milliseconds()}
	w.settleS = w.ru.leave + w.ru.coalesce + 2*cfg.SweepEvery.Milliseconds() + w.tick
	w.start = cfg.Start.UnixMilli()
	w.now = w.start
	w.clock.ms.Store(w.start)
	w.ticks = int(cfg.Duration.Milliseconds() / w.tick)
	w.wheel = make([][]event, w.ticks+1)

	store, mini := cfg.Store, cfg.Mini
	if store == nil {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, fmt.Errorf("sim: starting miniredis: %w", err)
		}
		defer mr.Close()
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		store, mini = goredis.New(c), mr
	}
	if mini != nil {
		mini.SetTime(cfg.Start)
		mini.ClockTTL(true)
	}
	w.store = &countingStore{inner: store}
	w.seq = newSequencer()
	if cfg.Engine == EngineWASM {
		if w.rt = cfg.Runtime; w.rt == nil {
			if w.rt, err = host.NewRuntime(ctx, cfg.Module, host.Options{}); err != nil {
				return nil, err
			}
			defer w.rt.Close(context.WithoutCancel(ctx))
		}
	}
	w.populate()
	for i := range w.edges {
		if err := w.boot(w.edges[i]); err != nil {
			return nil, err
		}
	}
	if w.mix.Crash > 0 {
		w.crashK = int(float64(w.ticks) * w.mix.Crash)
		w.backK = w.crashK + int(w.mix.CrashDown.Milliseconds()/w.tick)
	}
	sweepK := int(cfg.SweepEvery.Milliseconds() / w.tick)
	censusK := int(cfg.CensusEvery.Milliseconds() / w.tick)
	progressK := int(time.Minute.Milliseconds() / w.tick)
	for w.k = 1; w.k <= w.ticks; w.k++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w.now = w.start + int64(w.k)*w.tick
		w.clock.ms.Store(w.now)
		if mini != nil {
			mini.SetTime(time.UnixMilli(w.now))
		}
		if w.crashK > 0 && w.k == w.crashK {
			w.crash()
		}
		if w.crashK > 0 && w.k == w.backK && !w.edges[w.down].up {
			if err := w.boot(w.edges[w.down]); err != nil {
				return nil, err
			}
		}
		w.startWatching()
		for _, ev := range w.wheel[w.k] {
			w.handle(ev)
		}
		w.wheel[w.k] = nil
		if err := w.flush(); err != nil {
			return nil, err
		}
		if w.k%sweepK == 0 {
			if err := w.sweep(censusK > 0 && w.k%censusK == 0); err != nil {
				return nil, err
			}
		}
		if cfg.Progress != nil && w.k%progressK == 0 {
			r := w.rows[len(w.rows)-1]
			fmt.Fprintf(cfg.Progress, "  t=%-6s wall=%5.1fs online=%d/%d viewers=%d/%d events=%d redis=%d\n",
				time.Duration(int64(w.k)*w.tick)*time.Millisecond, time.Since(w.wall0).Seconds(),
				r.Engine[core.StatusOnline], r.Truth[core.StatusOnline], r.ViewersEngine, r.ViewersTruth,
				w.stats.Events, w.store.calls.Load())
		}
	}
	return w.result(), nil
}

// populate creates the users, their devices, the videos and the edges,
// and schedules the first sessions.
func (w *world) populate() {
	m := w.mix
	kinds := []core.Kind{core.KindWeb, core.KindDesktop, core.KindIOS, core.KindAndroid}
	weights := []float64{m.Web, m.Desktop, m.IOS, m.Android}
	w.users = make([]user, w.cfg.Users)
	w.byID = make(map[string]int32, w.cfg.Users)
	for i := range w.users {
		u := &w.users[i]
		u.id = "u" + strconv.Itoa(i)
		u.watching, u.viaDev = -1, -1
		w.byID[u.id] = int32(i)
		n := 1
		for extra := m.Devices - 1; extra > 0 && n < 4; extra-- {
			if w.rng.Float64() < math.Min(extra, 1) {
				n++
			}
		}
		for j := 0; j < n; j++ {
			kind := kinds[pick(w.rng, weights)]
			d := device{idx: int32(len(w.devs)), id: kind.String() + "-" + strconv.Itoa(j), user: int32(i), kind: kind,
				iv: interval(kind), edge: -1}
			u.devs = append(u.devs, d.idx)
			w.devs = append(w.devs, d)
			// Start some devices online, the rest after a first gap.
			share := float64(m.Session) / float64(m.Session+m.Gap)
			at := w.now + w.exp(m.Gap)
			if w.rng.Float64() < share {
				at = w.now + w.rng.Int64N(interval(kind))
			}
			w.at(at, event{kind: evStart, id: d.idx})
		}
		if w.rng.Float64() < m.DND {
			u.dnd = true
			w.at(w.now+w.exp(time.Hour), event{kind: evManual, id: int32(i)})
		}
	}
	w.videos = make([]video, m.Videos)
	w.vweight = make([]float64, m.Videos)
	for i := range w.videos {
		w.videos[i] = video{id: strconv.Itoa(10000 + i), members: map[int32]int64{}}
		w.vweight[i] = 1 / float64(i+1) // a few popular videos, a long tail
	}
	w.edges = make([]*edge, w.cfg.Edges)
	for i := range w.edges {
		w.edges[i] = &edge{idx: i, name: "edge-" + strconv.Itoa(i)}
	}
}

func interval(k core.Kind) int64 {
	if k == core.KindIOS || k == core.KindAndroid {
		return 60_000
	}
	return 30_000
}

func pick(r *rand.Rand, weights []float64) int {
	total := 0.0
	for _, x := range weights {
		total += x
	}
	x := r.Float64() * total
	for i, wt := range weights {
		if x < wt {
			return i
		}
		x -= wt
	}
	return len(weights) - 1
}

// exp draws an exponential duration of the given mean, in ms (at least 1).
func (w *world) exp(mean time.Duration) int64 {
	return max(1, int64(w.rng.ExpFloat64()*float64(mean.Milliseconds())))
}

// at schedules ev at the first tick at or after t (and after the current one).
func (w *world) at(t int64, ev event) {
	k := int((t - w.start + w.tick - 1) / w.tick)
	if k <= w.k {
		k = w.k + 1
	}
	if k <= w.ticks {
		w.wheel[k] = append(w.wheel[k], ev)
	}
}

// config is the engine configuration of every edge.
func (w *world) config() core.Config {
	return core.Config{Prefix: w.cfg.Prefix, Clock: w.clock, UserBuckets: 1, ScopeBuckets: 1,
		Classes: map[string]core.ScopeClass{videoClass: {Layout: core.LayoutCompact, Window: videoWindow,
			Shards: videoShards, SweepInterval: videoSweep}}}
}

// boot starts (or restarts) an edge.
func (w *world) boot(e *edge) error {
	e.lives++
	e.store = &edgeStore{inner: w.store, seq: w.seq, ticket: -1}
	seed := fmt.Sprintf("sim-%d-%s-%d", w.cfg.Seed, e.name, e.lives)
	cfg := w.config()
	switch w.cfg.Engine {
	case EngineWASM:
		in, err := w.rt.NewInstance(w.ctx, e.store)
		if err != nil {
			return err
		}
		eng, err := in.Configure(w.ctx, cfg, host.EngineOptions{Seed: seed})
		if err != nil {
			in.Close(w.ctx)
			return err
		}
		e.p, e.close = eng, func() { in.Close(context.WithoutCancel(w.ctx)) }
	default:
		cfg.Rand = abi.SeededRand(seed)
		eng, err := core.New(e.store, cfg)
		if err != nil {
			return err
		}
		e.p, e.close = eng, func() {}
	}
	e.up = true
	return nil
}

// crash takes an edge down: its instance is gone, and its connected
// devices reconnect to the others.
func (w *world) crash() {
	if len(w.edges) < 2 {
		return // nowhere to move to
	}
	e := w.edges[w.rng.IntN(len(w.edges))]
	w.down = e.idx
	e.up = false
	e.close()
	e.queue = nil
	w.stats.Crashes++
	for i := range w.devs {
		d := &w.devs[i]
		if d.edge != e.idx {
			continue
		}
		d.edge = -1
		if d.online && !d.bg && !d.paused {
			d.paused = true
			d.gen++
			d.beatGen++
			w.stats.Moved++
			w.at(w.now+1000+w.rng.Int64N(max(1, w.mix.CrashReconnect.Milliseconds()-1000)), event{kind: evReconnect, gen: d.gen, id: d.idx})
		}
	}
}

// liveEdge picks an edge that is up.
func (w *world) liveEdge() int {
	for {
		if e := w.edges[w.rng.IntN(len(w.edges))]; e.up {
			return e.idx
		}
	}
}

func (w *world) send(edgeIdx int, o op) {
	e := w.edges[edgeIdx]
	e.queue = append(e.queue, o)
}

// nextBeat schedules a device's next heartbeat, I·(1−U·jitter) from now.
func (w *world) nextBeat(d *device) {
	iv := float64(d.iv) * (1 - w.rng.Float64()*w.mix.Jitter)
	w.at(w.now+int64(iv), event{kind: evBeat, gen: d.beatGen, id: d.idx})
}

func (w *world) beatOp(d *device, active bool) op {
	return op{kind: opBeat, dev: d.idx, user: d.user, hb: core.Heartbeat{User: w.users[d.user].id, Device: d.id,
		Kind: d.kind, Gateway: w.edges[d.edge].name, Token: d.token, Active: active, Background: d.bg}}
}

func mobile(k core.Kind) bool { return k == core.KindIOS || k == core.KindAndroid }

// handle carries out one event: the client's side of it, and the
// operations it sends.
func (w *world) handle(ev event) {
	m := w.mix
	if ev.kind == evManual {
		w.toggleDND(ev.id)
		return
	}
	if ev.kind == evTouch || ev.kind == evWatchEnd {
		w.watchEvent(ev)
		return
	}
	d := &w.devs[ev.id]
	switch ev.kind {
	case evStart:
		if d.online {
			return
		}
		d.online, d.bg, d.paused, d.busy = true, false, false, true
		d.busyEnd = w.now + w.exp(m.Busy)
		d.gen++
		d.beatGen++
		d.edge = w.liveEdge()
		if w.rng.Float64() < m.Implicit {
			d.token = "" // the first heartbeat logs in
			w.send(d.edge, w.beatOp(d, true))
		} else {
			o := op{kind: opLogin, dev: d.idx, user: d.user}
			if w.rng.Float64() < m.Exclusive {
				p := core.PolicyExclusive
				o.policy = &p
			}
			w.send(d.edge, o)
		}
		w.nextBeat(d)
		w.at(w.now+w.exp(m.Session), event{kind: evEnd, gen: d.gen, id: d.idx})
		if mobile(d.kind) {
			w.at(w.now+w.exp(m.Foreground), event{kind: evBackground, gen: d.beatGen, id: d.idx})
		}
	case evBeat:
		if ev.gen != d.beatGen || !d.online || d.bg || d.paused {
			return
		}
		if w.now >= d.busyEnd {
			d.busy = !d.busy
			if d.busy {
				d.busyEnd = w.now + w.exp(m.Busy)
			} else {
				d.busyEnd = w.now + w.exp(m.Idle)
			}
		}
		switch r := w.rng.Float64(); {
		case r < m.Switch:
			// A network switch: the gateway sees the connection close; the
			// client reconnects, maybe to another edge, within seconds.
			w.send(d.edge, op{kind: opDisconnect, dev: d.idx, user: d.user, hb: core.Heartbeat{Token: d.token}})
			d.paused = true
			d.beatGen++
			w.stats.Switches++
			w.at(w.now+1000+w.rng.Int64N(max(1, m.SwitchDelay.Milliseconds()-1000)), event{kind: evReconnect, gen: d.gen, id: d.idx})
			return
		case r < m.Switch+m.Loss:
			w.stats.Lost++
		default:
			w.send(d.edge, w.beatOp(d, d.busy))
		}
		w.nextBeat(d)
	case evBackground:
		if ev.gen != d.beatGen || !d.online || d.bg || d.paused {
			return
		}
		d.bg = true
		w.send(d.edge, w.beatOp(d, false))
		d.beatGen++
		w.at(w.now+w.exp(m.Background), event{kind: evForeground, gen: d.beatGen, id: d.idx})
	case evForeground:
		if ev.gen != d.beatGen || !d.online || !d.bg {
			return
		}
		d.bg, d.busy = false, true
		d.busyEnd = w.now + w.exp(m.Busy)
		if d.edge < 0 || !w.edges[d.edge].up {
			d.edge = w.liveEdge()
		}
		w.send(d.edge, w.beatOp(d, true))
		w.nextBeat(d)
		w.at(w.now+w.exp(m.Foreground), event{kind: evBackground, gen: d.beatGen, id: d.idx})
	case evReconnect:
		if ev.gen != d.gen || !d.online || !d.paused {
			return
		}
		d.paused = false
		d.beatGen++
		d.edge = w.liveEdge()
		w.send(d.edge, w.beatOp(d, d.busy))
		w.nextBeat(d)
		if mobile(d.kind) {
			w.at(w.now+w.exp(m.Foreground), event{kind: evBackground, gen: d.beatGen, id: d.idx})
		}
	case evEnd:
		if ev.gen != d.gen || !d.online {
			return
		}
		edgeIdx := d.edge
		if edgeIdx < 0 || !w.edges[edgeIdx].up {
			edgeIdx = w.liveEdge()
		}
		switch r := w.rng.Float64(); {
		case d.paused:
			// still reconnecting: the session just ends
		case r < m.Logout:
			w.send(edgeIdx, op{kind: opLogout, dev: d.idx, user: d.user, hb: core.Heartbeat{Token: d.token}})
		case r < m.Logout+m.Disconnect:
			w.send(edgeIdx, op{kind: opDisconnect, dev: d.idx, user: d.user, hb: core.Heartbeat{Token: d.token}})
		default:
			w.stats.Vanished++ // no goodbye: the session expires
		}
		w.offline(d)
	case evStale:
		// A kicked client, not yet told, heartbeats with its old token.
		edgeIdx := w.liveEdge()
		o := op{kind: opBeat, dev: d.idx, user: d.user, stale: true, hb: core.Heartbeat{User: w.users[d.user].id,
			Device: d.id, Kind: d.kind, Gateway: w.edges[edgeIdx].name, Token: d.stale, Active: true}}
		w.send(edgeIdx, o)
		w.at(w.now+w.exp(w.mix.Gap), event{kind: evStart, id: d.idx})
	}
}

// offline ends a device's session on the client's side and schedules the
// next one.
func (w *world) offline(d *device) {
	d.online, d.paused, d.bg = false, false, false
	d.gen++
	d.beatGen++
	w.at(w.now+w.exp(w.mix.Gap), event{kind: evStart, id: d.idx})
}

func (w *world) toggleDND(ui int32) {
	u := &w.users[ui]
	next := core.ManualDND
	wait := w.exp(w.mix.DNDFor)
	if u.plan == core.ManualDND {
		next, wait = core.ManualNone, w.exp(time.Hour)
	}
	u.plan = next
	w.send(w.liveEdge(), op{kind: opManual, user: ui, manual: next})
	w.at(w.now+wait, event{kind: evManual, id: ui})
}

// startWatching lets online users start watching videos: each user online
// in the foreground starts with probability Watch per minute.
func (w *world) startWatching() {
	if len(w.videos) == 0 || w.mix.Watch == 0 {
		return
	}
	expected := float64(len(w.users)) * w.mix.Watch * float64(w.tick) / 60000
	n := int(expected)
	if w.rng.Float64() < expected-float64(n) {
		n++
	}
	for ; n > 0; n-- {
		ui := int32(w.rng.IntN(len(w.users)))
		u := &w.users[ui]
		if u.watching >= 0 {
			continue
		}
		via := int32(-1)
		for _, di := range u.devs {
			if d := &w.devs[di]; d.online && !d.bg && !d.paused {
				via = di
				break
			}
		}
		if via < 0 {
			continue
		}
		u.watching, u.viaDev = int32(pick(w.rng, w.vweight)), via
		u.wgen++
		w.stats.Watches++
		w.send(w.devs[via].edge, op{kind: opTouch, user: ui, video: u.watching})
		w.at(w.now+w.touchEvery(), event{kind: evTouch, gen: u.wgen, id: ui})
		w.at(w.now+w.exp(w.mix.WatchFor), event{kind: evWatchEnd, gen: u.wgen, id: ui})
	}
}

func (w *world) touchEvery() int64 {
	return int64(30_000 * (1 - 0.1*w.rng.Float64()))
}

func (w *world) watchEvent(ev event) {
	u := &w.users[ev.id]
	if ev.gen != u.wgen || u.watching < 0 {
		return
	}
	d := &w.devs[u.viaDev]
	gone := !d.online || d.bg || d.paused
	switch {
	case ev.kind == evTouch && !gone:
		w.send(d.edge, op{kind: opTouch, user: ev.id, video: u.watching})
		w.at(w.now+w.touchEvery(), event{kind: evTouch, gen: u.wgen, id: ev.id})
		return
	case ev.kind == evWatchEnd && !gone && w.rng.Float64() < w.mix.Leave:
		w.send(d.edge, op{kind: opLeave, user: ev.id, video: u.watching})
	}
	// The viewer stops: left, or the device went away (the window ends it).
	u.watching, u.viaDev = -1, -1
	u.wgen++
}

func (w *world) violation(format string, args ...any) {
	w.stats.Violations++
	if len(w.viol) < 50 {
		w.viol = append(w.viol, fmt.Sprintf("t=%s: ", time.Duration(w.now-w.start)*time.Millisecond)+fmt.Sprintf(format, args...))
	}
}
