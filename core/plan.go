package core

import (
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// This file is the plan machinery (docs/design.md §2): an operation as a
// value that yields the script calls it needs, takes their results, may
// yield more, and ends with its outcome and the messages to publish. A plan
// performs no I/O, reads no clock and starts no goroutine: the caller (a
// driver such as Engine) makes the calls, feeds the results back, supplies
// "now", and publishes. TestPlansDoNoIO keeps the plan files (plan*.go) so.
//
// Each operation's plan is a state machine over its rounds, as a raft
// node's Ready/Advance cycle is: a struct holding its plan[T] (the machine
// and the outcome) and where it is, whose next method takes a round's
// values and returns the next round (body). No continuation is captured in
// a closure, so a plan reads from top to bottom, and a one-call plan is one
// allocation (a heartbeat's, none where its driver reuses it).

// Errors of stepping a plan: a driver's mistakes, which no caller handles
// but by fixing the driver, so they are not exported.
var (
	// errPlanResults means Step got a number of results other than the
	// number of calls the plan yielded. The plan ends with a *StoreError
	// that matches it and ErrReply, as an engine ends an operation whose
	// store broke its contract.
	errPlanResults = errors.New("presence: wrong number of results for a plan's calls")
	// errPlanDone means Step was called on a plan that has ended.
	errPlanDone = errors.New("presence: plan already ended")
	// errPlanPending is the error Outcome returns before the plan has ended.
	errPlanPending = errors.New("presence: plan not ended")
)

// Publication is a message a plan asks its driver to publish once the plan
// has ended: a status change on the change channel or a kick on a
// gateway's kick channel. Publishing is the driver's I/O; a failed publish
// changes nothing the plan did.
type Publication struct {
	Kind    string // "change", "kick" or "loss", as Metrics.Published counts them
	Channel string
	Payload []byte
	// ID is the event's outbox ID (docs/design.md §7), also in Payload:
	// once the message is out, the driver acknowledges it (Planner.Ack),
	// or a sweep delivers it again.
	ID string
}

// Stepper is a plan of any outcome type, as a driver steps it: Calls are
// the script calls to make now (in one round trip where the store
// pipelines them), Step takes their results, one per call and in order,
// until Done. Only this package makes Steppers.
//
// A driver that knows an operation's outcome type T saves Result's
// conversion to any (an allocation for most outcomes) by asserting the
// Stepper to interface{ Outcome() (T, error) }, which every Stepper of
// that operation implements, as Result with the outcome typed.
type Stepper interface {
	// Calls returns the script calls the plan needs next: send them all
	// (in one round trip where the store pipelines) and pass their
	// results to Step. It returns nil once the plan has ended. The slice
	// is the plan's: do not change it.
	Calls() []Call
	// Step feeds the results of the calls last returned by Calls, one per
	// call and in order, and advances the plan: to more calls (a resend by
	// source after NOSCRIPT, a further round of the operation) or to its
	// end. It returns an error on an ended plan (which it leaves as it
	// was), and on a wrong number of results a *StoreError matching
	// ErrReply, with which the plan then ends. A result's error is not
	// Step's: it ends the plan with a *StoreError (see Result).
	Step(results []Result) error
	// Done reports whether the plan has ended.
	Done() bool
	// SetNow sets the instant of the calls the plan builds from here on:
	// the driver's clock, or the zero time to let each script read the
	// server's clock. A driver that has a clock sets it before each Step.
	SetNow(now time.Time)
	// Messages returns what the ended plan asks its driver to publish, in
	// order: changes, then kicks. It is empty while the plan runs and
	// after an operation that failed.
	Messages() []Publication
	// Result returns the plan's outcome, of the type Op's doc names for
	// the operation (what Engine.Do returns), and its error once it has
	// ended, or an error before. An operation that reports progress
	// along with an error (a sweep interrupted midway) returns both.
	Result() (any, error)
	machine() *machine
}

// plan is one operation as a step machine whose outcome is a T: the
// Stepper of every operation (its methods are documented there). The
// core's own drivers read the typed Outcome.
type plan[T any] struct {
	m   machine
	out T
}

func (p *plan[T]) Calls() []Call { return p.m.calls() }

func (p *plan[T]) Step(results []Result) error { return p.m.step(results) }

func (p *plan[T]) Done() bool { return p.m.done }

func (p *plan[T]) SetNow(now time.Time) { p.m.now = nowArg(now) }

func (p *plan[T]) Result() (any, error) { return p.Outcome() }

// Outcome is Result with the outcome typed.
func (p *plan[T]) Outcome() (T, error) {
	if !p.m.done {
		var zero T
		return zero, errPlanPending
	}
	return p.out, p.m.err
}

func (p *plan[T]) Messages() []Publication {
	if !p.m.done {
		return nil
	}
	return p.m.pubs
}

func (p *plan[T]) machine() *machine { return &p.m }

// nowArg formats t as plans and scripts take "now": milliseconds since the
// epoch; the zero time gives "", which lets each script read the server's
// clock.
func nowArg(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return itoa(t.UnixMilli())
}

// round is one step of a plan: the calls to send together. costs, when
// set, holds each call's estimated server time in µs: the machine then
// sends the calls in waves, each in a round trip of its own, of at most
// roundMicros (a call more costly alone goes alone), so that Redis serves
// other clients between them, and hands the plan the values of every wave
// together, in order. A round marked abortable is one before which a
// driver may end the plan because its caller gave up (a sweep between its
// bucket rounds, which then releases its locks: aborter).
type round struct {
	op        string
	calls     []Call
	costs     []int
	abortable bool
}

// body is an operation's own state machine, which its machine steps: a
// plan type that records where it is, and next takes the values of the
// round it last asked for (vals, one per call, the machine's until the next
// step: a body that keeps them across rounds copies them) and returns the
// round that follows, or nil to end the plan with the error (nil: the plan
// ended well).
type body interface {
	next(vals []Value) (*round, error)
}

// failer is a body that decides what a failure of its round's calls (a
// result's error, a wrong number of results, keys that span slots) leads
// to; a body that is not ends the plan with the error.
type failer interface {
	failed(err error) (*round, error)
}

// aborter is a body some of whose rounds are abortable: aborted is what
// ending the plan with err before such a round leads to.
type aborter interface {
	aborted(err error) (*round, error)
}

// noteKind names what a note asks of the driver.
type noteKind uint8

const (
	noteStoreError noteKind = iota // Metrics.Error(op, err): a call failed
	noteLogFailed                  // Metrics.Error("change log", err) and a warning: the change log append failed
	noteHeartbeats                 // Metrics.Heartbeats(accepted, refused)
	noteSwept                      // Metrics.Swept(op, report)
)

// note is a metric or a log line the plan asks its driver for, in the
// order the operation met them.
type note struct {
	kind     noteKind
	op       string
	err      error
	accepted int
	refused  int
	report   *SweepReport
}

// machine is the state of a plan whatever its outcome type: the
// operation's state machine (body), the round it is in, the NOSCRIPT
// fallback, the change log append that ends a plan that decided events
// (finish), the end.
type machine struct {
	scripts *scriptSet
	now     string
	body    body

	cur      *round
	sent     []Call   // what Calls returns: the wave's calls, or the resends by source
	wave     int      // where the wave sent starts in cur.calls
	waved    []Value  // the values of the round's earlier waves
	first    []Result // in a fallback: the results of the round's first send
	missing  []int    // in a fallback: the calls resent, by index in the round
	fallback bool

	// logging: the round sent is finish's change log append, after which
	// the plan ends with after, whatever the append's outcome
	logging bool
	after   error

	done  bool
	err   error
	out   []delivery // events decided so far, delivered by finish
	pubs  []Publication
	notes []note

	// room for a one-call round and its notes and values, so that a
	// one-call plan allocates little beyond itself
	r0    round
	call0 [1]Call
	vbuf  [1]Value
	nbuf  [1]note
}

// start makes b the plan's state machine and moves the plan to its first
// round r (or its end, with err).
func (m *machine) start(b body, r *round, err error) {
	m.body = b
	m.settle(r, err)
}

// one returns the machine's own round of the single call c, for a plan
// whose round has one call.
func (m *machine) one(op string, c Call) *round {
	m.call0[0] = c
	m.r0 = round{op: op, calls: m.call0[:]}
	return &m.r0
}

// proceed is what comes of the values of the round sent.
func (m *machine) proceed(vals []Value) (*round, error) {
	if m.logging {
		m.logging = false
		return nil, m.after
	}
	return m.body.next(vals)
}

// failRound is what a failure of the round's calls leads to. A failed
// change log append is noted, not returned, and leaves the events
// unacknowledged (their IDs cleared from the messages) so that a sweep
// delivers them again.
func (m *machine) failRound(err error) (*round, error) {
	if m.logging {
		m.logging = false
		m.note(note{kind: noteLogFailed, err: err})
		for i := range m.pubs {
			m.pubs[i].ID = "" // not logged: not delivered, so not acknowledged
		}
		return nil, m.after
	}
	if f, ok := m.body.(failer); ok {
		return f.failed(err)
	}
	return nil, err
}

func (m *machine) calls() []Call {
	if m.done {
		return nil
	}
	return m.sent
}

func (m *machine) note(n note) {
	if m.notes == nil {
		m.notes = m.nbuf[:0]
	}
	m.notes = append(m.notes, n)
}

// takeNotes returns the notes since the last call, valid until the next
// step.
func (m *machine) takeNotes() []note {
	n := m.notes
	m.notes = m.notes[:0]
	return n
}

// settle moves the plan to round r, or ends it when r is nil (with err).
// A round whose keys span slots fails before it is sent; a round without
// calls goes on at once.
func (m *machine) settle(r *round, err error) {
	for {
		if r == nil || err != nil {
			m.done, m.err, m.cur, m.sent = true, err, nil, nil
			if err != nil {
				m.pubs = nil
			}
			return
		}
		if e := checkSlots(r.calls); e != nil {
			r, err = m.failRound(e)
			continue
		}
		if len(r.calls) == 0 {
			r, err = m.proceed(nil)
			continue
		}
		m.cur, m.fallback, m.first, m.missing, m.waved = r, false, nil, nil, nil
		m.sendWave(0)
		return
	}
}

// roundMicros is the most server time, in µs, that one round trip of a
// plan asks of Redis by its calls' estimated costs (round.costs): Redis
// runs a pipeline's calls back to back, so that a client waits behind
// all of them.
const roundMicros = 1000

// sendWave makes the calls of the current round from index from, as many
// as fit in roundMicros, the next to send.
func (m *machine) sendWave(from int) {
	r := m.cur
	end := len(r.calls)
	if r.costs != nil {
		end = waveEnd(r.costs, from)
	}
	m.wave, m.sent = from, r.calls[from:end]
	m.fallback, m.first, m.missing = false, nil, nil
}

// sentCost is the estimated server time of the calls to send now: the
// wave's (a resend by source costs as its first send), 0 for calls of a
// round without costs.
func (m *machine) sentCost() int {
	if m.done || m.cur == nil || m.cur.costs == nil {
		return 0
	}
	sum := 0
	if m.fallback {
		for _, i := range m.missing {
			sum += m.cur.costs[m.wave+i]
		}
		return sum
	}
	for _, c := range m.cur.costs[m.wave : m.wave+len(m.sent)] {
		sum += c
	}
	return sum
}

// waveEnd is where the wave of calls of these costs that starts at from
// ends: as many calls as fit in roundMicros, at least one.
func waveEnd(costs []int, from int) int {
	sum := 0
	for i := from; i < len(costs); i++ {
		if i > from && sum+costs[i] > roundMicros {
			return i
		}
		sum += costs[i]
	}
	return len(costs)
}

// waves is the number of round trips a round of calls of these costs takes.
func waves(costs []int) int {
	n := 0
	for at := 0; at < len(costs); n++ {
		at = waveEnd(costs, at)
	}
	return n
}

func checkSlots(calls []Call) error {
	for _, c := range calls {
		if err := sameSlot(c.Keys); err != nil {
			return err
		}
	}
	return nil
}

// fail ends the plan with err (before its first round).
func (m *machine) fail(err error) { m.settle(nil, err) }

func (m *machine) step(res []Result) error {
	if m.done {
		return errPlanDone
	}
	r := m.cur
	if len(res) != len(m.sent) {
		err := &StoreError{Op: r.op, Err: &wrapErrors{
			msg:  ErrReply.Error() + ": " + errPlanResults.Error() + ": store returned " + itoa(int64(len(res))) + " results for " + itoa(int64(len(m.sent))) + " calls",
			errs: []error{ErrReply, errPlanResults}}}
		m.settle(m.failRound(err))
		return err
	}
	if m.fallback {
		merged := m.first
		for j, i := range m.missing {
			merged[i] = res[j]
		}
		res = merged
	} else {
		var missing []int
		for i, x := range res {
			if x.Err != nil && errors.Is(x.Err, ErrNoScript) {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			// the server lacks these scripts: send them by source, once
			again := make([]Call, len(missing))
			for j, i := range missing {
				c := m.sent[i]
				if s := m.scripts.bySHA[c.SHA]; s != nil {
					c = Call{Source: s.Source(), Keys: c.Keys, Args: c.Args}
				}
				again[j] = c
			}
			m.first = append([]Result(nil), res...)
			m.missing, m.sent, m.fallback = missing, again, true
			return nil
		}
	}
	for _, x := range res {
		if x.Err != nil {
			err := &StoreError{Op: r.op, Unavailable: errors.Is(x.Err, ErrUnavailable), Err: layoutErr(x.Err)}
			m.note(note{kind: noteStoreError, op: r.op, err: err})
			m.settle(m.failRound(err))
			return nil
		}
	}
	if end := m.wave + len(res); end < len(r.calls) || m.waved != nil {
		// a round of several waves: keep this one's values
		if m.waved == nil {
			m.waved = make([]Value, 0, len(r.calls))
		}
		for _, x := range res {
			m.waved = append(m.waved, x.Value)
		}
		if end < len(r.calls) {
			m.sendWave(end)
			return nil
		}
		vals := m.waved
		m.waved = nil
		m.settle(m.proceed(vals))
		return nil
	}
	vals := m.vbuf[:0]
	if len(res) > len(m.vbuf) {
		vals = make([]Value, 0, len(res))
	}
	for _, x := range res {
		vals = append(vals, x.Value)
	}
	m.settle(m.proceed(vals))
	return nil
}

// midRound reports whether the plan has sent part of an abortable round:
// a driver whose caller gave up sends the rest of it regardless, so that
// the plan stops at the round's end, having read what the round did.
func (m *machine) midRound() bool {
	return !m.done && (m.wave > 0 || m.fallback) && m.cur.abortable
}

// abort ends the plan with err where its current round allows it (an
// abortable round, not yet sent: aborter). It reports whether it did.
func (m *machine) abort(err error) bool {
	if m.done || m.fallback || m.wave > 0 || !m.cur.abortable {
		return false
	}
	m.settle(m.body.(aborter).aborted(err))
	return true
}

// planner builds plans: the engine's settings and scripts, and the source
// of its tokens, without its store.
type planner struct {
	settings *settings
	scripts  scriptSet
	rand     io.Reader
	hints    *pageHints
	seen     bucketsSeen
	pools    planPools             // plans to reuse (reuse.go)
	lastNow  atomic.Pointer[msArg] // the latest now formatted (nowText)
}

// Planner makes the plans of an engine's operations (Plan), for drivers
// other than Engine's blocking one: hosts with their own I/O, or many
// operations sharing round trips (Engine.Run). Its plans draw tokens from
// Config.Rand as the engine's would, when each is made.
type Planner struct{ p *planner }

// NewPlanner returns a planner configured by cfg, as New configures an
// engine (an *InputError for an invalid configuration). Config.Clock,
// Metrics and Logger are the driver's: a planner does not use them.
func NewPlanner(cfg Config) (*Planner, error) {
	p, err := newPlanner(cfg)
	if err != nil {
		return nil, err
	}
	return &Planner{p}, nil
}

func newPlanner(cfg Config) (*planner, error) {
	s, err := newSettings(cfg)
	if err != nil {
		return nil, err
	}
	p := &planner{settings: s, scripts: *engineScripts(), rand: cfg.Rand, hints: newPageHints(len(s.users)),
		seen: make(bucketsSeen, len(s.users))}
	if p.rand == nil {
		p.rand = cryptoRand
	}
	return p, nil
}

// finish ends an operation whose events are decided (m.out): it queues
// their messages, losses first, then changes, then kicks, and, with a
// change log, appends them to it first in a round of its own (the
// machine's: see failRound). err is the plan's error after that (a refused
// heartbeat's).
func (p *planner) finish(m *machine, err error) (*round, error) {
	if len(m.out) == 0 {
		return nil, err
	}
	var changes []Change
	var kicks []Kick
	var losses []Loss
	var ids, lossIDs []string
	for _, d := range m.out {
		if d.loss != nil {
			losses, lossIDs = append(losses, *d.loss), append(lossIDs, d.id)
			m.pubs = append(m.pubs, Publication{Kind: "loss", Channel: p.changeChannel(),
				Payload: marshalLoss(*d.loss, d.id), ID: d.id})
		}
	}
	for _, d := range m.out {
		if d.kick == nil && d.loss == nil {
			changes = append(changes, d.change)
			ids = append(ids, d.id)
			m.pubs = append(m.pubs, Publication{Kind: "change", Channel: p.changeChannel(),
				Payload: marshalChange(d.change, d.id), ID: d.id})
		}
	}
	for _, d := range m.out {
		if d.kick != nil {
			kicks = append(kicks, *d.kick)
			ids = append(ids, d.id)
			if d.kick.Gateway != "" {
				m.pubs = append(m.pubs, Publication{Kind: "kick", Channel: p.kickChannel(d.kick.Gateway),
					Payload: marshalKick(*d.kick, d.id), ID: d.id})
			}
		}
	}
	if p.settings.changeLog == 0 {
		return nil, err
	}
	calls, costs := p.logAppendCalls(changes, kicks, losses, append(ids, lossIDs...))
	m.logging, m.after = true, err
	return &round{op: "change log", calls: calls, costs: costs}, nil
}

func (p *planner) changeChannel() string { return p.settings.keys.prefix + ":changes" }

func (p *planner) kickChannel(gateway string) string {
	return p.settings.keys.prefix + ":kick:" + gateway
}
