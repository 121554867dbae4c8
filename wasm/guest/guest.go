package guest

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
)

// Guest runs ABI requests as plans (core.Planner): a request starts a
// plan, whose response is its end or the calls it waits for, tagged with
// the plan's ID; a resume request hands a plan its results. It does no
// I/O and imports nothing. Up to abi.MaxPlans plans are in flight at once;
// starting one more abandons the oldest. It is safe for concurrent use,
// though it handles one request at a time.
type Guest struct {
	mu       sync.Mutex
	mode     string
	publish  bool
	planner  *core.Planner
	lastMax  int                       // how many last good counts to keep
	lastGood map[core.Scope]core.Count // served, stale, while Redis is unreachable

	next    int64
	flights map[int64]flight
	order   []int64 // IDs in flight (and some ended), oldest first
	buf     []byte  // the last response, reused by the next
	compact bool    // the request being handled is in the compact form

	// the room the hot path reuses: the requests' decoder, and the
	// heartbeats' and batches' flights that have ended
	dec        abi.Decoder
	freeBeats  []*beatFlight
	freeBatchs []*batchFlight
}

// flight is a plan in flight and how to turn its outcome into the result
// of the op that started it.
type flight interface {
	stepper() core.Stepper
	result() (any, error)
}

// funcFlight is a flight whose result end gives.
type funcFlight struct {
	plan core.Stepper
	end  func() (any, error)
}

func (f *funcFlight) stepper() core.Stepper { return f.plan }
func (f *funcFlight) result() (any, error)  { return f.end() }

// beatFlight is a heartbeat's flight, in one allocation with its result:
// the hot path of a module, where every allocation counts, so it reads
// the typed outcome (core.Stepper) rather than Result's boxed one.
type beatFlight struct {
	hb core.Heartbeat // the op, here rather than boxed on its own
	p  beatPlan
	w  abi.Ack
}

// beatPlan is a heartbeat's plan, whose outcome is typed.
type beatPlan interface {
	core.Stepper
	Outcome() (core.Ack, error)
}

func (f *beatFlight) stepper() core.Stepper { return f.p }

func (f *beatFlight) result() (any, error) {
	ack, err := f.p.Outcome()
	if err != nil && err != ack.Err {
		return nil, err
	}
	f.w = abi.FromAck(ack)
	return &f.w, nil
}

// endedFlight is the flight of a plan whose result is wire of its outcome.
type endedFlight[T any] struct {
	p    core.Stepper
	wire func(T) any
}

func (f *endedFlight[T]) stepper() core.Stepper { return f.p }

func (f *endedFlight[T]) result() (any, error) {
	v, err := outcome[T](f.p)
	if err != nil {
		return nil, err
	}
	return f.wire(v), nil
}

// New returns a guest, not yet configured.
func New() *Guest {
	return &Guest{flights: map[int64]flight{}}
}

// InFlight returns the IDs of the plans in flight, oldest first.
func (g *Guest) InFlight() []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []int64
	for _, id := range g.order {
		if g.flights[id] != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// Handle runs one request, in JSON or in the compact form, and returns its
// response, which stays valid until the next Handle. A compact request
// gets a compact response where the response has that form (calls, an
// Ack, Acks), and JSON otherwise. It never panics and never fails: malformed input,
// refusals and failures all come back as error responses; a panic inside
// becomes an error of code "internal" (and forgets the plan it was
// stepping).
func (g *Guest) Handle(request []byte) (response []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			response = abi.EncodeResponse(abi.Response{Error: &abi.Error{Code: abi.CodeInternal,
				Message: abi.ErrInternal.Error() + ": " + panicText(p)}})
		}
	}()
	g.compact = len(request) > 0 && request[0] == abi.Compact
	g.buf = g.handle(g.buf[:0], request)
	return g.buf
}

// append appends resp to b in the form of the request: the compact form
// where it has one, JSON otherwise.
func (g *Guest) append(b []byte, resp abi.Response) []byte {
	if g.compact {
		return abi.AppendResponseCompact(b, resp)
	}
	return abi.AppendResponse(b, resp)
}

func (g *Guest) handle(b, request []byte) []byte {
	req, err := g.dec.Decode(request) // valid until the next request: copied where kept
	if err != nil {
		return g.append(b, abi.Response{Error: abi.EncodeError(err)})
	}
	switch a := req.Args.(type) {
	case *abi.Config:
		res, err := g.configure(a)
		return g.append(b, abi.Response{Result: res, Error: abi.EncodeError(err)})
	case *abi.PlanRef:
		if g.flights[a.Plan] == nil {
			return g.append(b, abi.Response{Error: abi.EncodeError(unknownPlan(a.Plan))})
		}
		delete(g.flights, a.Plan)
		return g.append(b, abi.Response{Result: &abi.Empty{}})
	}
	if g.planner == nil {
		return g.append(b, abi.Response{Error: abi.EncodeError(abi.ErrUnconfigured)})
	}
	var now time.Time // the zero time: the scripts read the server's clock
	if g.mode == abi.ClockHost {
		if req.Now <= 0 {
			return g.append(b, abi.Response{Error: abi.EncodeError(&abi.DecodeError{What: "request",
				Field: "now", Reason: "required: the engine runs on the host's clock"})})
		}
		now = time.UnixMilli(req.Now)
	}
	if r, ok := req.Args.(*abi.Resume); ok {
		f := g.flights[r.Plan]
		if f == nil {
			return g.append(b, abi.Response{Error: abi.EncodeError(unknownPlan(r.Plan))})
		}
		if n := len(f.stepper().Calls()); len(r.Results) != n {
			err := &planError{abi.ErrResults, "plan " + strconv.FormatInt(r.Plan, 10) + " waits for " + strconv.Itoa(n) + " results, got " + strconv.Itoa(len(r.Results))}
			return g.append(b, abi.Response{Error: abi.EncodeError(err)})
		}
		f.stepper().SetNow(now)
		delete(g.flights, r.Plan) // a panic in Step forgets the plan
		if err := f.stepper().Step(r.Results); err != nil && !f.stepper().Done() {
			return g.append(b, abi.Response{Error: abi.EncodeError(err)})
		}
		return g.respond(b, r.Plan, f)
	}
	var f flight
	if a, ok := req.Args.(*abi.Heartbeat); ok {
		f = g.startBeat(a, now)
	} else if f, err = g.start(req, now); err != nil {
		return g.append(b, abi.Response{Error: abi.EncodeError(err)})
	}
	if f.stepper().Done() {
		return g.respond(b, 0, f)
	}
	g.next++
	return g.respond(b, g.next, f)
}

func unknownPlan(id int64) error {
	return &planError{abi.ErrUnknownPlan, strconv.FormatInt(id, 10)}
}

// planError is a refusal of a request about a plan: kind (an abi error it
// matches) with detail. The guest formats its errors without package fmt,
// which would cost the module about 0.3 MB.
type planError struct {
	kind   error
	detail string
}

func (e *planError) Error() string { return e.kind.Error() + ": " + e.detail }
func (e *planError) Unwrap() error { return e.kind }

// panicText describes a recovered panic value.
func panicText(p any) string {
	switch v := p.(type) {
	case error:
		return v.Error()
	case string:
		return v
	case interface{ String() string }:
		return v.String()
	default:
		return "panic of a non-error value"
	}
}

// respond returns the plan's next calls under id (keeping it in flight),
// or its end.
func (g *Guest) respond(b []byte, id int64, f flight) []byte {
	if !f.stepper().Done() {
		if g.flights[id] == nil {
			g.admit(id)
		}
		g.flights[id] = f
		return g.append(b, abi.Response{Plan: id, Calls: f.stepper().Calls()})
	}
	res, err := f.result()
	if err != nil {
		return g.append(b, abi.Response{Error: abi.EncodeError(err)})
	}
	resp := abi.Response{Result: res}
	if g.publish {
		resp.Messages = abi.FromPublications(f.stepper().Messages())
	}
	b = g.append(b, resp)
	g.planner.Release(f.stepper()) // read and written out: a later plan may take its room
	g.recycle(f)
	return b
}

// admit makes room for plan id: it forgets the ended plans at the head of
// the order and, at abi.MaxPlans in flight, abandons the oldest.
func (g *Guest) admit(id int64) {
	if len(g.order) >= 2*abi.MaxPlans || len(g.flights) >= abi.MaxPlans {
		live := g.order[:0]
		for _, x := range g.order {
			if g.flights[x] != nil {
				live = append(live, x)
			}
		}
		g.order = live
		for len(g.flights) >= abi.MaxPlans {
			delete(g.flights, g.order[0])
			g.order = g.order[1:]
		}
	}
	g.order = append(g.order, id)
}

func (g *Guest) configure(cfg *abi.Config) (any, error) {
	c, err := cfg.Core()
	if err != nil {
		return nil, err
	}
	mode := cfg.Clock
	if mode == "" {
		mode = abi.ClockHost
	}
	if cfg.Seed != nil {
		c.Rand = abi.SeededRand(*cfg.Seed)
	}
	pl, err := core.NewPlanner(c)
	if err != nil {
		return nil, err
	}
	g.planner, g.mode, g.publish = pl, mode, cfg.Publish
	g.lastMax = c.LastGoodCounts
	if g.lastMax == 0 {
		g.lastMax = 10000 // core.Config.LastGoodCounts's default
	}
	g.lastGood = map[core.Scope]core.Count{}
	g.flights, g.order = map[int64]flight{}, nil // plans of the engine replaced are forgotten
	return &abi.Configured{ABI: abi.Version, Clock: mode}, nil
}

// startBeat makes the plan of a heartbeat. It is start's first case, apart:
// a JavaScript engine compiles a WebAssembly function whole on its first
// call, and an isolate's first request is most often a heartbeat, which
// then need not compile the switch over every other operation.
func (g *Guest) startBeat(a *abi.Heartbeat, now time.Time) flight {
	var f *beatFlight
	if n := len(g.freeBeats); n > 0 {
		f, g.freeBeats = g.freeBeats[n-1], g.freeBeats[:n-1]
	} else {
		f = new(beatFlight)
	}
	f.hb = a.Core()
	f.p = g.planner.Plan(&f.hb, now).(beatPlan)
	return f
}

// batchFlight is a heartbeat batch's flight, in one allocation with the
// beats its plan holds and its result, reused once it has ended.
type batchFlight struct {
	beats core.HeartbeatBatch // the op, here rather than boxed on its own
	p     interface {
		core.Stepper
		Outcome() ([]core.Ack, error)
	}
	w abi.Acks
}

func (f *batchFlight) stepper() core.Stepper { return f.p }

func (f *batchFlight) result() (any, error) {
	acks, err := f.p.Outcome()
	if err != nil {
		return nil, err
	}
	f.w.Acks = resized(f.w.Acks, len(acks))
	for i, ack := range acks {
		f.w.Acks[i] = abi.FromAck(ack)
	}
	return &f.w, nil
}

// startBatch makes the plan of a heartbeat batch.
func (g *Guest) startBatch(a *abi.HeartbeatBatch, now time.Time) flight {
	var f *batchFlight
	if n := len(g.freeBatchs); n > 0 {
		f, g.freeBatchs = g.freeBatchs[n-1], g.freeBatchs[:n-1]
	} else {
		f = new(batchFlight)
	}
	f.beats = resized(f.beats, len(a.Beats))
	for i, b := range a.Beats {
		f.beats[i] = b.Core()
	}
	f.p = g.planner.Plan(&f.beats, now).(interface {
		core.Stepper
		Outcome() ([]core.Ack, error)
	})
	return f
}

// recycle keeps an ended heartbeat's or batch's flight for the next.
func (g *Guest) recycle(f flight) {
	switch f := f.(type) {
	case *beatFlight:
		*f = beatFlight{}
		g.freeBeats = append(g.freeBeats, f)
	case *batchFlight:
		clear(f.beats)
		clear(f.w.Acks)
		f.p = nil
		g.freeBatchs = append(g.freeBatchs, f)
	}
}

// resized returns s with length n, reusing its room (not zeroed: the
// caller sets every element).
func resized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// start makes the plan of req, any request but a heartbeat (startBeat).
func (g *Guest) start(req abi.Request, now time.Time) (flight, error) {
	pl := g.planner
	switch a := req.Args.(type) {
	case *abi.HeartbeatBatch:
		return g.startBatch(a, now), nil
	case *abi.Login:
		p := pl.Plan(a.Core(), now)
		return ended(p, func(r core.LoginResult) any { w := abi.FromLoginResult(r); return &w }), nil
	case *abi.AckArgs:
		p := pl.Plan(core.AckEvents{IDs: a.IDs}, now)
		return ended(p, func(struct{}) any { return &abi.Empty{} }), nil
	case *abi.End:
		var p core.Stepper
		if req.Op == abi.OpDisconnect {
			p = pl.Plan(core.Disconnect{User: a.User, Device: a.Device, Token: a.Token}, now)
		} else {
			p = pl.Plan(core.Logout{User: a.User, Device: a.Device, Token: a.Token}, now)
		}
		return ended(p, func(r core.Ended) any { w := abi.FromEnded(r); return &w }), nil
	case *abi.SetManual:
		p := pl.Plan(core.SetManual{User: a.User, Manual: core.Manual(a.Manual), TTL: time.Duration(a.TTL)}, now)
		return ended(p, func(cs []core.Change) any { w := abi.FromChanges(cs); return &w }), nil
	case *abi.StatusArgs:
		p := pl.Plan(core.ReadStatus{User: a.User}, now)
		return ended(p, func(s core.UserStatus) any { w := abi.FromUserStatus(s); return &w }), nil
	case *abi.StatusesArgs:
		p := pl.Plan(core.ReadStatuses{Users: a.Users}, now)
		return ended(p, func(ss []core.UserStatus) any {
			out := &abi.Statuses{Statuses: make([]abi.UserStatus, len(ss))}
			for i, s := range ss {
				out.Statuses[i] = abi.FromUserStatus(s)
			}
			return out
		}), nil
	case *abi.Touch:
		sc := core.Scope{Class: a.Scope.Class, ID: a.Scope.ID}
		if req.Op == abi.OpLeave {
			return ended(pl.Plan(core.Leave{Scope: sc, Member: a.Member}, now), func(removed bool) any { return &abi.Removed{Removed: removed} }), nil
		}
		return ended(pl.Plan(core.ScopeTouch{Scope: sc, Member: a.Member}, now), func(struct{}) any { return &abi.Empty{} }), nil
	case *abi.TouchBatch:
		ts := make([]core.ScopeTouch, len(a.Touches))
		for i, t := range a.Touches {
			ts[i] = core.ScopeTouch{Scope: core.Scope{Class: t.Scope.Class, ID: t.Scope.ID}, Member: t.Member}
		}
		return ended(pl.Plan(core.TouchBatch(ts), now), func(struct{}) any { return &abi.Empty{} }), nil
	case *abi.ScopeArgs:
		sc := core.Scope{Class: a.Scope.Class, ID: a.Scope.ID}
		p := pl.Plan(core.ReadCount{Scope: sc}, now)
		return &funcFlight{plan: p, end: func() (any, error) {
			c, err := g.count(sc, p)
			if err != nil {
				return nil, err
			}
			w := abi.FromCount(c)
			return &w, nil
		}}, nil
	case *abi.MembersArgs:
		p := pl.Plan(core.ReadMembers{Scope: core.Scope{Class: a.Scope.Class, ID: a.Scope.ID}, Cursor: a.Cursor, Limit: a.Limit}, now)
		return ended(p, func(pg core.MemberPage) any { w := abi.FromMemberPage(pg); return &w }), nil
	case *abi.ActiveWithinArgs:
		p := pl.Plan(core.ReadActive{Scope: core.Scope{Class: a.Scope.Class, ID: a.Scope.ID}, Within: time.Duration(a.Within)}, now)
		return ended(p, func(n int64) any { return &abi.N{N: n} }), nil
	case *abi.ChangeLogArgs:
		p := pl.Plan(core.ReadChangeLog{After: a.After, Limit: a.Limit}, now)
		return ended(p, func(pg core.LogPage) any { w := abi.FromChangeLog(pg.Entries, pg.Gap); return &w }), nil
	case *abi.Empty:
		switch req.Op {
		case abi.OpOnline:
			return ended(pl.Plan(core.ReadOnline{}, now), func(counts map[core.Status]int64) any { w := abi.FromOnline(counts); return &w }), nil
		case abi.OpSweepUsers:
			return ended(pl.Plan(core.SweepUsers{}, now), sweepReport), nil
		case abi.OpSweepScopes:
			return ended(pl.Plan(core.SweepScopes{}, now), sweepReport), nil
		}
	}
	return nil, &abi.DecodeError{What: "request", Field: "op", Reason: "unhandled operation " + req.Op}
}

func sweepReport(r core.SweepReport) any { w := abi.FromSweepReport(r); return &w }

// outcome is p's Result as the type the op's doc names.
func outcome[T any](p core.Stepper) (T, error) {
	v, err := p.Result()
	t, _ := v.(T)
	return t, err
}

// ended returns the flight of p, whose result is wire of its outcome.
func ended[T any](p core.Stepper, wire func(T) any) flight {
	return &endedFlight[T]{p: p, wire: wire}
}

// count is core.Engine.Count's ending: the count read, remembered, or,
// when Redis is unreachable, the last good one marked stale.
func (g *Guest) count(sc core.Scope, p core.Stepper) (core.Count, error) {
	c, err := outcome[core.Count](p)
	if err != nil {
		if errors.Is(err, core.ErrUnavailable) {
			if last, ok := g.lastGood[sc]; ok {
				last.Stale = true
				return last, nil
			}
		}
		return core.Count{}, err
	}
	if g.lastMax > 0 {
		if _, ok := g.lastGood[sc]; !ok && len(g.lastGood) >= g.lastMax {
			for k := range g.lastGood { // evict an arbitrary entry to stay bounded
				delete(g.lastGood, k)
				break
			}
		}
		g.lastGood[sc] = c
	}
	return c, nil
}
