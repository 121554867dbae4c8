package core

import (
	"context"
	"errors"
	"sync"
)

// Group commit (docs/design.md §2): the calls of an Engine's concurrent
// callers leave together, as a database commits many transactions with one
// log flush. The core starts no goroutine: each caller's own goroutine
// does the I/O, leader and followers in turn.
//
// A call that finds fewer than Config.GroupCommit round trips of combined
// calls on the wire leads: it leaves at once, alone, exactly as without
// group commit. A call that finds them all out queues. When a leader's
// round trip is back, it hands what queued meanwhile (up to maxTake calls)
// to the first caller in it, which leads them as one batch: the heartbeats
// of one user bucket as one HeartbeatBatch plan (one steady script call),
// the statuses of one bucket as one Statuses plan, any other operation as
// its own plan, and all of these stepped together by Run's driver, their
// calls in shared round trips of about roundMicros. So the batch size
// follows the load: one call on an idle engine, what arrived during one
// round trip on a busy one. Every caller gets what its own call would have
// returned: a heartbeat's Ack and refusal are its own, and a failed script
// call fails the calls it carried.
//
// A caller whose context ends while its call waits in the queue returns
// the context's error (in a *StoreError, as a store fails a call whose
// context ended), and its call is not sent. Once a batch has taken it, it
// returns that error at once, and the batch goes on: its
// call is applied (and published, and counted) or fails as any other. A
// batch leaves without its leader's cancellation, by the latest deadline
// of its callers, so that no caller's cancellation fails the others; a
// leader that gave up still leads the batch it was handed, leaving its own
// call out.

// maxTake is the most calls one batch takes: about a round trip's worth
// (roundMicros) of steady beats.
const maxTake = roundMicros / steadyMicros

// jobKind is what a job carries.
type jobKind uint8

const (
	jobPlan   jobKind = iota // any operation, as its plan
	jobBeat                  // a Heartbeat, merged with its bucket's
	jobStatus                // a Status, merged with its bucket's
)

// jobState is where a queued job is; guarded by combiner.mu.
type jobState uint8

const (
	jobQueued  jobState = iota
	jobTaken            // in a batch that a leader drives
	jobLead             // handed the lead of a batch (job.batch)
	jobDropped          // its caller gave up while it was queued: never sent
)

// job is one caller's operation on its way through group commit.
type job struct {
	kind jobKind
	op   string // what a failure is reported as: the operation's first round
	ctx  context.Context
	hb   Heartbeat // jobBeat
	user string    // jobStatus
	plan Stepper   // jobPlan: its outcome is in the plan

	// the outcome of a jobBeat or jobStatus
	ack Ack
	st  UserStatus
	err error

	state jobState      // guarded by combiner.mu
	batch []*job        // jobLead: the batch to lead
	wake  chan struct{} // cap 1: the outcome is ready, or the lead is ours
}

// newJob takes a job from the engine's pool: jobs are reused once their
// caller has read the outcome (release).
func (c *combiner) newJob(ctx context.Context, kind jobKind, op string) *job {
	j, _ := c.jobs.Get().(*job)
	if j == nil {
		j = &job{wake: make(chan struct{}, 1)}
	}
	j.ctx, j.kind, j.op = ctx, kind, op
	return j
}

// release returns j to the pool; only its caller does, after the outcome,
// when no leader holds it any more.
func (c *combiner) release(j *job) {
	wake := j.wake
	*j = job{wake: wake}
	c.jobs.Put(j)
}

// combiner is an Engine's group commit.
type combiner struct {
	mu    sync.Mutex
	lanes int // leaders on the wire at most (Config.GroupCommit); 0: off
	out   int // leaders on the wire
	queue []*job
	jobs  sync.Pool // of *job, reused
}

// commit carries j out for its caller. It returns the error of a caller
// that gave up before j's outcome was there (j is then not the caller's to
// release), else nil with the outcome in j.
func (e *Engine) commit(j *job) error {
	if err := e.wait(j); err != nil {
		// as the store fails a call whose context ended: retryable when
		// the deadline passed, matching ctx's error either way
		c := ClassifyError(err)
		se := &StoreError{Op: j.op, Unavailable: errors.Is(c, ErrUnavailable), Err: c}
		e.metrics.Error(j.op, se)
		return se
	}
	return nil
}

// wait is commit but for the error's shape: ctx's error.
func (e *Engine) wait(j *job) error {
	c := &e.comb
	c.mu.Lock()
	if c.out < c.lanes {
		c.out++
		c.mu.Unlock()
		e.alone(j)
		e.handOff()
		return nil
	}
	j.state = jobQueued
	c.queue = append(c.queue, j)
	c.mu.Unlock()
	select {
	case <-j.wake:
	case <-j.ctx.Done():
		c.mu.Lock()
		switch j.state {
		case jobQueued: // not sent, and now it never will be
			j.state = jobDropped
			for i, q := range c.queue {
				if q == j {
					c.queue = append(c.queue[:i], c.queue[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
			return j.ctx.Err()
		case jobTaken: // the batch goes on without its caller
			c.mu.Unlock()
			return j.ctx.Err()
		}
		c.mu.Unlock()
		<-j.wake // jobLead: the lead is ours, and its signal on the way
	}
	if j.state == jobLead { // set before the signal, which we have
		if !e.lead(j.batch, j) {
			return j.ctx.Err()
		}
	}
	return nil
}

// alone runs j as it runs without group commit: its own plan, its own
// context.
func (e *Engine) alone(j *job) {
	switch j.kind {
	case jobBeat:
		j.ack, j.err = e.beatAlone(j.ctx, j.hb, true)
	case jobStatus:
		p := e.plans.status(e.nowArg(), j.user)
		e.drive(j.ctx, p)
		j.st, j.err = p.Outcome()
	default:
		e.drive(j.ctx, j.plan)
	}
}

// handOff ends a leader's turn: the calls queued meanwhile go to the first
// of them to lead, or the lane is free.
func (e *Engine) handOff() {
	c := &e.comb
	c.mu.Lock()
	n := min(len(c.queue), maxTake)
	if n == 0 {
		c.out--
		c.mu.Unlock()
		return
	}
	next := make([]*job, n)
	copy(next, c.queue)
	c.queue = append(c.queue[:0], c.queue[n:]...)
	for _, j := range next {
		j.state = jobTaken
	}
	h := next[0]
	h.state, h.batch = jobLead, next
	c.mu.Unlock()
	h.wake <- struct{}{}
}

// lead drives batch, whose leader is self, wakes every caller in it but
// self as its outcome is ready, and hands off. It reports whether self's
// own call was sent: not when its caller had given up before.
func (e *Engine) lead(batch []*job, self *job) (sent bool) {
	defer e.handOff()
	// calls whose callers gave up before the batch left stay out: those
	// callers return their context's error (they are not woken)
	live := batch[:0]
	for _, j := range batch {
		if j.ctx.Err() == nil {
			live = append(live, j)
		}
	}
	for _, j := range live {
		sent = sent || j == self
	}
	switch len(live) {
	case 0:
		return false
	case 1:
		e.alone(live[0])
		if live[0] != self {
			live[0].wake <- struct{}{}
		}
		return sent
	}
	plans, ends := e.combine(live)
	ctx, cancel := batchContext(self.ctx, live)
	e.run(ctx, plans, func(i int) {
		for _, j := range ends[i]() {
			if j != self {
				j.wake <- struct{}{}
			}
		}
	})
	cancel()
	return sent
}

// combine makes the plans of a batch: the heartbeats of each user bucket
// in one plan (a HeartbeatBatch when more than one), the statuses of each
// bucket likewise, every other job's own plan. ends[i] sets the outcomes
// of plan i's jobs, once it has ended, and returns those jobs.
func (e *Engine) combine(live []*job) (plans []Stepper, ends []func() []*job) {
	now := e.nowArg()
	keys := e.settings.keys
	var beats, statuses map[uint32][]*job
	var beatOrder, statusOrder []uint32
	for _, j := range live {
		switch j.kind {
		case jobBeat:
			b := keys.userBucket(j.hb.User)
			if beats == nil {
				beats = map[uint32][]*job{}
			}
			if beats[b] == nil {
				beatOrder = append(beatOrder, b)
			}
			beats[b] = append(beats[b], j)
		case jobStatus:
			b := keys.userBucket(j.user)
			if statuses == nil {
				statuses = map[uint32][]*job{}
			}
			if statuses[b] == nil {
				statusOrder = append(statusOrder, b)
			}
			statuses[b] = append(statuses[b], j)
		default:
			plans = append(plans, j.plan)
			ends = append(ends, func() []*job { return []*job{j} })
		}
	}
	for _, b := range beatOrder {
		js := beats[b]
		if len(js) == 1 {
			j, p := js[0], e.plans.beat(now, js[0].hb, true)
			plans = append(plans, p)
			ends = append(ends, func() []*job { j.ack, j.err = p.Outcome(); return js })
			continue
		}
		hbs := make([]Heartbeat, len(js))
		for k, j := range js {
			hbs[k] = j.hb
		}
		p := e.plans.heartbeatBatch(now, hbs, true)
		plans = append(plans, p)
		ends = append(ends, func() []*job {
			acks, err := p.Outcome()
			for k, j := range js {
				if err != nil {
					j.ack, j.err = Ack{}, err
				} else {
					j.ack, j.err = acks[k], acks[k].Err
				}
			}
			return js
		})
	}
	for _, b := range statusOrder {
		js := statuses[b]
		users := make([]string, len(js))
		for k, j := range js {
			users[k] = j.user
		}
		p := e.plans.statuses(now, users)
		plans = append(plans, p)
		ends = append(ends, func() []*job {
			sts, err := p.Outcome()
			for k, j := range js {
				if err != nil {
					j.st, j.err = UserStatus{}, err
				} else {
					j.st, j.err = sts[k], nil
				}
			}
			return js
		})
	}
	return plans, ends
}

// batchContext is the context a batch leaves with: the leader's values,
// without its cancellation, ending at the latest deadline of the callers
// in the batch (never, if one has none).
func batchContext(leader context.Context, live []*job) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(leader)
	d, ok := live[0].ctx.Deadline()
	for _, j := range live[1:] {
		dj, has := j.ctx.Deadline()
		if !has {
			ok = false
			break
		}
		if dj.After(d) {
			d = dj
		}
	}
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, d)
}

// groupCommit reports whether the engine combines calls.
func (e *Engine) groupCommit() bool { return e.comb.lanes > 0 }

// exec drives p for its caller, through group commit when it is on. It
// returns the caller's context error when the caller gave up first (p's
// outcome is then not the caller's to read), else nil with p ended.
func (e *Engine) exec(ctx context.Context, p Stepper) error {
	if !e.groupCommit() || p.Done() {
		e.drive(ctx, p)
		return nil
	}
	j := e.comb.newJob(ctx, jobPlan, p.machine().cur.op)
	j.plan = p
	if err := e.commit(j); err != nil {
		return err
	}
	e.comb.release(j)
	return nil
}
