package core

import (
	"context"
	"errors"
	"slices"
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

	state  jobState      // guarded by combiner.mu
	batch  *batch        // jobLead: the batch to lead
	bucket uint32        // jobBeat, jobStatus: the user's bucket, once combined
	wake   chan struct{} // cap 1: the outcome is ready, or the lead is ours
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
	mu      sync.Mutex
	lanes   int // leaders on the wire at most (Config.GroupCommit); 0: off
	out     int // leaders on the wire
	queue   []*job
	jobs    sync.Pool // of *job, reused
	batches sync.Pool // of *batch, reused
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
	b, _ := c.batches.Get().(*batch)
	if b == nil {
		b = new(batch)
	}
	b.jobs = append(b.jobs[:0], c.queue[:n]...)
	c.queue = append(c.queue[:0], c.queue[n:]...)
	for _, j := range b.jobs {
		j.state = jobTaken
	}
	h := b.jobs[0]
	h.state, h.batch = jobLead, b
	c.mu.Unlock()
	h.wake <- struct{}{}
}

// batch is what a leader drives: the jobs it was handed and the plans
// they make, with the room both take, reused from batch to batch
// (combiner.batches), so that a busy engine's group commit allocates
// little but the plans of several beats.
type batch struct {
	jobs   []*job // as handed over; then the live ones
	self   *job   // the leader's own
	order  []*job // the jobs by group
	groups []group
	plans  []Stepper // by group
	hbs    []Heartbeat
	users  []string
	rank   []int        // by user bucket: its group among the beats' (or the statuses'), from 1
	count  []int        // by such group: its jobs
	start  []int        // by such group: where its next job goes in order
	alone  []*beatPlan  // the single beats' plans, the engine's to reuse
	many   []*beatsPlan // the several beats' plans, likewise
	run    runState
}

// group is one plan of a batch and the jobs it carries: a job's own plan,
// the beats of one bucket (one beat's plan, or a HeartbeatBatch's), or
// the statuses of one bucket.
type group struct {
	kind  jobKind
	jobs  []*job // in batch.order
	one   *beatPlan
	beats *beatsPlan
	sts   *plan[[]UserStatus]
}

// lead drives b, whose leader is self, wakes every caller in it but self
// as its outcome is ready, and hands off. It reports whether self's own
// call was sent: not when its caller had given up before.
func (e *Engine) lead(b *batch, self *job) (sent bool) {
	defer e.handOff()
	// calls whose callers gave up before the batch left stay out: those
	// callers return their context's error (they are not woken)
	live := b.jobs[:0]
	for _, j := range b.jobs {
		if j.ctx.Err() == nil {
			live = append(live, j)
			sent = sent || j == self
		}
	}
	b.jobs, b.self = live, self
	switch len(live) {
	case 0:
	case 1:
		e.alone(live[0])
		if live[0] != self {
			live[0].wake <- struct{}{}
		}
	default:
		e.combine(b)
		ctx, cancel := batchContext(self.ctx, live)
		e.run(ctx, b.plans, b)
		cancel()
	}
	e.recycle(b)
	return sent
}

// recycle returns b, its jobs ended, and its heartbeats' plans to their
// pools.
func (e *Engine) recycle(b *batch) {
	for _, bp := range b.alone {
		e.plans.pools.release(bp)
	}
	for _, bp := range b.many {
		e.plans.pools.release(bp)
	}
	clear(b.alone)
	clear(b.many)
	b.many = b.many[:0]
	clear(b.jobs)
	clear(b.order)
	clear(b.groups)
	clear(b.plans)
	clear(b.hbs)
	clear(b.users)
	b.alone, b.jobs, b.order, b.groups, b.plans = b.alone[:0], b.jobs[:0], b.order[:0], b.groups[:0], b.plans[:0]
	b.hbs, b.users, b.self = b.hbs[:0], b.users[:0], nil
	e.comb.batches.Put(b)
}

// combine makes the plans of b: every job's own plan, in order, then the
// heartbeats of each user bucket in one plan (a HeartbeatBatch when more
// than one), then the statuses of each bucket likewise, the buckets in the
// order their first call came.
func (e *Engine) combine(b *batch) {
	now := e.nowArg()
	keys := e.settings.keys
	// room for every job, so that the groups' slices share it
	b.order = slices.Grow(b.order[:0], len(b.jobs))
	b.hbs = slices.Grow(b.hbs[:0], len(b.jobs))
	b.users = slices.Grow(b.users[:0], len(b.jobs))
	for _, j := range b.jobs {
		switch j.kind {
		case jobBeat:
			j.bucket = keys.userBucket(j.hb.User)
		case jobStatus:
			j.bucket = keys.userBucket(j.user)
		default:
			b.order = append(b.order, j)
			b.groups = append(b.groups, group{kind: jobPlan, jobs: b.order[len(b.order)-1:]})
			b.plans = append(b.plans, j.plan)
		}
	}
	for _, kind := range [2]jobKind{jobBeat, jobStatus} {
		from, first := len(b.order), len(b.groups)
		if n := b.bucketGroups(kind, len(e.settings.users)); n == 0 {
			continue
		}
		for g := first; g < len(b.groups); g++ {
			jobs := b.order[from : from+b.count[g-first]]
			from += len(jobs)
			b.groups[g].jobs = jobs
			switch {
			case kind == jobStatus:
				users := b.users[len(b.users):]
				for _, j := range jobs {
					users = append(users, j.user)
				}
				b.users = b.users[:len(b.users)+len(users)]
				b.groups[g].sts = e.plans.statuses(now, users)
				b.plans = append(b.plans, b.groups[g].sts)
			case len(jobs) == 1:
				bp := e.plans.pools.beatPlan()
				e.plans.startBeat(bp, now, jobs[0].hb, true)
				b.alone = append(b.alone, bp)
				b.groups[g].one = bp
				b.plans = append(b.plans, &bp.plan)
			default:
				hbs := b.hbs[len(b.hbs):]
				for _, j := range jobs {
					hbs = append(hbs, j.hb)
				}
				b.hbs = b.hbs[:len(b.hbs)+len(hbs)]
				bp := e.plans.pools.beatsPlan()
				e.plans.startBeats(bp, now, hbs, true)
				b.many = append(b.many, bp)
				b.groups[g].beats = bp
				b.plans = append(b.plans, &bp.plan)
			}
		}
	}
}

// bucketGroups appends the jobs of kind to b.order, grouped by bucket in
// the order their first job came, and a group for each bucket to b.groups
// (jobs set later), with its number of jobs in b.count; it returns the
// number of groups. buckets is the engine's number of user buckets.
func (b *batch) bucketGroups(kind jobKind, buckets int) int {
	if cap(b.rank) < buckets {
		b.rank = make([]int, buckets)
	}
	rank := b.rank[:buckets]
	clear(rank)
	b.count = b.count[:0]
	for _, j := range b.jobs {
		if j.kind != kind {
			continue
		}
		if rank[j.bucket] == 0 {
			b.count = append(b.count, 0)
			rank[j.bucket] = len(b.count)
			b.groups = append(b.groups, group{kind: kind})
		}
		b.count[rank[j.bucket]-1]++
	}
	if len(b.count) == 0 {
		return 0
	}
	// a counting sort: each group's first place, then the jobs in order
	at := len(b.order)
	b.order = b.order[:at+sumOf(b.count)]
	b.start = b.start[:0]
	next := at
	for _, n := range b.count {
		b.start = append(b.start, next)
		next += n
	}
	for _, j := range b.jobs {
		if j.kind == kind {
			g := rank[j.bucket] - 1
			b.order[b.start[g]] = j
			b.start[g]++
		}
	}
	return len(b.count)
}

func sumOf(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// ended sets the outcomes of the jobs of plan i, which has ended, and
// wakes their callers but the leader.
func (b *batch) ended(i int) {
	g := &b.groups[i]
	switch {
	case g.one != nil:
		j := g.jobs[0]
		j.ack, j.err = g.one.plan.Outcome()
	case g.beats != nil:
		acks, err := g.beats.plan.Outcome()
		for k, j := range g.jobs {
			if err != nil {
				j.ack, j.err = Ack{}, err
			} else {
				j.ack, j.err = acks[k], acks[k].Err
			}
		}
	case g.sts != nil:
		sts, err := g.sts.Outcome()
		for k, j := range g.jobs {
			if err != nil {
				j.st, j.err = UserStatus{}, err
			} else {
				j.st, j.err = sts[k], nil
			}
		}
	}
	for _, j := range g.jobs {
		if j != b.self {
			j.wake <- struct{}{}
		}
	}
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
