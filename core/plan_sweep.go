package core

import (
	"slices"
	"strconv"
	"strings"
)

// The plans of the sweeps (docs/design.md §10): bounded steps over every
// bucket, one round per step of all the buckets with more to do, and for
// the spread compact scopes a bucket step hands over, their shard walks.
// Engine's SweepUsers and SweepScopes drive them.

// sweepState is where a sweep's plan is: what the round it sent does.
type sweepState uint8

const (
	sweepBuckets sweepState = iota // the buckets' steps
	sweepShards                    // steps of a spread scope's shards (shard_sweep.lua)
	sweepRecount                   // the sizes of its shards, walked in several round trips
	sweepFinish                    // scope_finish.lua in the scope's bucket
	sweepDrop                      // the empty shards of a scope just released
	sweepUnlock                    // the pass's locks' release, after which the plan ends
)

// sweepPlan is a sweep pass: a first round over every bucket whose steps
// are small (the probe), so that it fits in one round trip, then further
// rounds of full steps for the buckets that have more to do, sent a few at
// a time (round.costs), so that Redis serves other clients between them.
// Each bucket's reply is read in turn; a scope bucket's may hand over
// spread compact scopes, swept one after the other (their shards in
// bounded steps, then scope_finish.lua, then, for a released scope, its
// empty shards) before the next reply is read. On failure the pass
// releases the locks it may hold, and the plan ends with the report so far
// and the error. A driver may abort the pass between its bucket rounds
// (round.abortable): it then releases its locks too. The pass's lock token
// is drawn when the plan is made.
type sweepPlan struct {
	plan    plan[SweepReport]
	p       *planner
	scopes  bool // a pass over the scope buckets, else over the user buckets
	token   string
	classes []string // scopes: the classes as sweep_scopes.lua takes them
	state   sweepState
	report  SweepReport

	pending []uint32 // the buckets of the bucket round sent
	calls   []Call   // its step calls, each holding its bucket's lock
	prev    []Call   // the bucket round's before it: the locks held until it is sent
	vals    []Value  // its replies, read one after another
	at      int      // the reply being read
	more    []uint32 // the buckets with more to do, so far

	// users: the outbox IDs this pass delivers again (every step of a
	// bucket reports the same waiting events: each is delivered once)
	redelivered map[string]struct{}

	// scopes: the spread scopes of the reply being read, the one being
	// swept (at spread[si]), and what the step reported for its bucket
	spread       []Value
	si           int
	stepMore     bool
	stepLock     string
	walk         shardWalk
	unlockResult error // sweepUnlock: the plan's error
}

// shardWalk is the sweep of one spread compact scope's shards: all
// shards in one round (sent about 1 ms a round trip), then further rounds
// for the shards not yet walked to their end.
type shardWalk struct {
	k         scopeKeys
	ref       string
	empties   int64
	scan      int
	pending   []int    // the shards not walked to their end
	cursors   []string // by shard
	sent      int      // the shard steps of the round sent
	costs     []int
	remaining int64 // the sizes of the shards walked to their end
	steps     int
	trips     int
}

func (p *planner) sweepUsers(now string) *plan[SweepReport] {
	return p.sweep(now, false, int(p.settings.keys.userBuckets))
}

// sweepScopes returns a scope sweep's plan. The client-side cache's fence
// at the end is the driver's (CachedReader.FenceCache).
func (p *planner) sweepScopes(now string) *plan[SweepReport] {
	return p.sweep(now, true, int(p.settings.keys.scopeBuckets))
}

func (p *planner) sweep(now string, scopes bool, buckets int) *plan[SweepReport] {
	sp := &sweepPlan{plan: plan[SweepReport]{m: machine{scripts: &p.scripts, now: now}}, p: p, scopes: scopes,
		report: SweepReport{Buckets: buckets}}
	m := &sp.plan.m
	m.body = sp
	token, err := p.newToken()
	if err != nil {
		m.fail(err)
		return &sp.plan
	}
	sp.token = token
	if scopes {
		names := p.settings.classNames
		sp.classes = append(make([]string, 0, 1+7*len(names)), strconv.Itoa(len(names)))
		for _, name := range names {
			c := p.settings.classes[name]
			sp.classes = append(sp.classes, name, strconv.Itoa(int(c.layout)), itoa(c.window), strconv.Itoa(c.shardSize),
				itoa(c.interval), itoa(c.bucket), flag(c.spread))
		}
	} else {
		sp.redelivered = map[string]struct{}{}
	}
	sp.pending = make([]uint32, buckets)
	for i := range sp.pending {
		sp.pending[i] = uint32(i)
	}
	m.settle(sp.bucketRound(), nil)
	return &sp.plan
}

// kind names the pass, as metrics and errors do.
func (sp *sweepPlan) kind() string {
	if sp.scopes {
		return "scopes"
	}
	return "users"
}

// bucketRound is the round of the pending buckets' steps.
func (sp *sweepPlan) bucketRound() *round {
	probe := sp.calls == nil
	sp.prev = sp.calls
	sp.calls = make([]Call, len(sp.pending))
	costs := make([]int, len(sp.pending))
	for i, b := range sp.pending {
		sp.calls[i], costs[i] = sp.step(b, probe)
	}
	sp.state = sweepBuckets
	return &round{op: "sweep " + sp.kind(), calls: sp.calls, costs: costs, abortable: !probe}
}

// step returns bucket b's step call and its estimated cost; a probe's is
// small, so that the first round fits in one round trip whatever is due.
func (sp *sweepPlan) step(b uint32, probe bool) (Call, int) {
	p, now, n := sp.p, sp.plan.m.now, sp.report.Buckets
	if !sp.scopes {
		limit, cost := p.settings.batch, sweepStepMicros+sweepOverrunMicros
		if probe {
			// a few users a bucket
			limit = min(limit, max(1, sweepProbeUsers/n))
			cost = min(cost, sweepOverheadMicros+limit*sweepUserMicros)
		}
		args := append(p.userArgs(now, b, 5), sp.token, itoa(p.settings.lease), strconv.Itoa(limit), itoa(sweepStepMicros),
			itoa(RedeliverAfter.Milliseconds()))
		return Call{SHA: p.scripts.sweepUsers.sha, Keys: p.settings.users[b].sweep, Args: args}, cost
	}
	budget := p.settings.budget
	if probe {
		// a few entries a bucket
		budget = min(budget, max(1, (roundMicros/n-sweepOverheadMicros)/sweepEntryMicros))
	}
	args := append(make([]string, 0, 12+len(sp.classes)), now, sp.token, itoa(p.settings.lease),
		strconv.Itoa(p.settings.batch), strconv.Itoa(budget), strconv.Itoa(p.settings.release), itoa(p.settings.countTTL),
		p.settings.keys.scopeBase(b), sufExact, sufCompact, sufHLL, sufCount)
	return Call{SHA: p.scripts.sweepScopes.sha, Keys: p.scopeBucketKeys(b), Args: append(args, sp.classes...)},
		sweepOverheadMicros + budget*sweepEntryMicros
}

func (sp *sweepPlan) next(vals []Value) (*round, error) {
	w := &sp.walk
	switch sp.state {
	case sweepBuckets:
		sp.vals = slices.Clone(vals) // a reply may take rounds of its own
		sp.report.Steps += len(sp.calls)
		sp.more, sp.at = sp.pending[:0], 0
		return sp.read()
	case sweepShards:
		return sp.shardsStepped(vals)
	case sweepRecount:
		sum, err := sumSizes(vals)
		if err != nil {
			return sp.unlock(sp.calls, err)
		}
		return sp.finishScope(sum)
	case sweepFinish:
		if released, err := vals[0].asInt(); err != nil || released == 0 {
			sp.report.Steps += w.steps + 1
			return sp.nextScope()
		}
		sp.report.Released++
		calls := make([]Call, w.k.cls.shards)
		for n := range calls {
			calls[n] = Call{SHA: sp.p.scripts.shardDrop.sha, Keys: []string{w.k.shardKeyN(n)}}
		}
		sp.state = sweepDrop
		return &round{op: "sweep scopes", calls: calls, costs: fill(len(calls), shardCallMicros)}, nil
	case sweepDrop:
		sp.report.Steps += w.steps + w.k.cls.shards + 1
		return sp.nextScope()
	}
	return nil, sp.unlockResult // sweepUnlock
}

// failed releases the pass's locks on any failure, but of the release.
func (sp *sweepPlan) failed(err error) (*round, error) {
	if sp.state == sweepUnlock {
		return nil, sp.unlockResult
	}
	return sp.unlock(sp.calls, err)
}

// aborted releases the locks of the bucket round sent before the one due.
func (sp *sweepPlan) aborted(err error) (*round, error) { return sp.unlock(sp.prev, err) }

// unlock releases this pass's locks (the last key of each step call), then
// ends the plan with the report so far and err.
func (sp *sweepPlan) unlock(steps []Call, err error) (*round, error) {
	sp.plan.out = sp.report
	calls := make([]Call, len(steps))
	for i, s := range steps {
		calls[i] = Call{SHA: sp.p.scripts.unlock.sha, Keys: s.Keys[len(s.Keys)-1:], Args: []string{sp.token}}
	}
	sp.state, sp.unlockResult = sweepUnlock, err
	return &round{op: "unlock", calls: calls}, nil
}

// read reads the bucket round's replies from sp.at on, then sends the next
// bucket round, or ends the pass.
func (sp *sweepPlan) read() (*round, error) {
	for ; sp.at < len(sp.vals); sp.at++ {
		if !sp.scopes {
			more, lock, err := sp.readUsers(sp.vals[sp.at])
			if err != nil {
				return sp.unlock(sp.calls, err)
			}
			sp.stepped(more, lock)
			continue
		}
		if err := sp.readScopes(sp.vals[sp.at]); err != nil {
			return sp.unlock(sp.calls, err)
		}
		if len(sp.spread) > 0 {
			sp.si = 0
			return sp.startScope()
		}
		sp.stepped(sp.stepMore, sp.stepLock)
	}
	sp.pending = sp.more
	if len(sp.pending) > 0 {
		return sp.bucketRound(), nil
	}
	report := sp.report
	sp.plan.m.note(note{kind: noteSwept, op: sp.kind(), report: &report})
	sp.plan.out = sp.report
	return sp.p.finish(&sp.plan.m, nil)
}

// stepped takes what the step of the reply being read reported: whether
// its bucket has more to do, and whether another sweeper held its lock.
func (sp *sweepPlan) stepped(more bool, lock string) {
	switch {
	case lock == "held":
		sp.report.Held++
	case more:
		sp.more = append(sp.more, sp.pending[sp.at])
	}
}

// readUsers reads a user step's reply (lua/sweep_users.lua).
func (sp *sweepPlan) readUsers(v Value) (more bool, lock string, err error) {
	now, rest, err := splitReply(v, 5)
	if err != nil {
		return false, "", err
	}
	visited, err1 := rest[0].asCount()
	moreFlag, err2 := rest[1].asInt()
	lock, err3 := rest[2].asString()
	if err1 != nil || err2 != nil || err3 != nil {
		return false, "", replyErr("sweep: %s", v)
	}
	changes, ids, err := decodeChanges(rest[3], now)
	if err != nil {
		return false, "", err
	}
	again, err := decodeOutbox(rest[4])
	if err != nil {
		return false, "", err
	}
	sp.report.Visited += int(visited)
	sp.report.Changes = append(sp.report.Changes, changes...)
	sp.plan.m.deliver(changes, ids, nil, nil)
	for _, d := range again {
		if _, dup := sp.redelivered[d.id]; !dup {
			sp.redelivered[d.id] = struct{}{}
			sp.plan.m.out = append(sp.plan.m.out, d)
		}
	}
	sp.report.observe(now)
	return moreFlag == 1, lock, nil
}

// readScopes reads a scope step's reply (lua/sweep_scopes.lua): its
// counts, whether its bucket has more to do, and the spread scopes it
// hands over (ref, empty sweeps, …).
func (sp *sweepPlan) readScopes(v Value) error {
	now, rest, err := splitReply(v, 6)
	if err != nil {
		return err
	}
	var n [4]int64
	for i := range n {
		if n[i], err = rest[i].asCount(); err != nil {
			return err
		}
	}
	lock, err := rest[4].asString()
	if err != nil {
		return err
	}
	sp.report.Visited += int(n[0])
	sp.report.Removed += int(n[1])
	sp.report.Released += int(n[2])
	sp.report.observe(now)
	items, err := rest[5].asArray(-1)
	if err != nil || len(items)%2 != 0 {
		return replyErr("spread scopes: %s", rest[5])
	}
	sp.spread, sp.stepMore, sp.stepLock = items, n[3] == 1, lock
	return nil
}

// startScope starts the walk of the spread scope at sp.spread[sp.si].
func (sp *sweepPlan) startScope() (*round, error) {
	p := sp.p
	ref, err1 := sp.spread[sp.si].asString()
	empties, err2 := sp.spread[sp.si+1].asCount()
	class, id, ok := strings.Cut(ref, ":")
	if err1 != nil || err2 != nil || !ok {
		return sp.unlock(sp.calls, replyErr("spread scope %s", Value{Kind: ValueArray, Array: sp.spread}))
	}
	k, err := p.scopeKeys("scope", Scope{Class: class, ID: id})
	if err != nil || !k.cls.spread {
		return sp.unlock(sp.calls, replyErr("spread scope %q is not a spread class", ref))
	}
	sp.walk = shardWalk{k: k, ref: ref, empties: empties, scan: min(p.settings.budget, shardScan),
		pending: make([]int, k.cls.shards), cursors: make([]string, k.cls.shards)}
	for n := range sp.walk.pending {
		sp.walk.pending[n], sp.walk.cursors[n] = n, "0"
	}
	return sp.walkShards()
}

// walkShards is the round of the shards not yet walked to their end; once
// all are, the scope's finish, after counting the shards again when the
// walk took several round trips (rounds, or waves of one): a member
// touched meanwhile into a shard walked earlier is in no shard's
// remainder.
func (sp *sweepPlan) walkShards() (*round, error) {
	w := &sp.walk
	if len(w.pending) == 0 {
		if w.trips > 1 {
			w.steps += w.k.cls.shards
			sp.state = sweepRecount
			return sp.p.shardSizes("sweep scopes", w.k), nil
		}
		return sp.finishScope(w.remaining)
	}
	count, win := strconv.Itoa(w.scan), itoa(w.k.cls.window)
	calls := make([]Call, len(w.pending))
	for i, n := range w.pending {
		calls[i] = Call{SHA: sp.p.scripts.shardSweep.sha, Keys: []string{w.k.shardKeyN(n)},
			Args: []string{sp.plan.m.now, win, w.cursors[n], count}}
	}
	w.sent, w.costs = len(calls), fill(len(calls), sweepOverheadMicros+w.scan*sweepEntryMicros)
	sp.state = sweepShards
	return &round{op: "sweep scopes", calls: calls, costs: w.costs}, nil
}

// shardsStepped reads the shard steps' replies.
func (sp *sweepPlan) shardsStepped(vals []Value) (*round, error) {
	w := &sp.walk
	w.steps += w.sent
	next := w.pending[:0]
	for i, v := range vals {
		now, rest, err := splitReply(v, 3)
		if err != nil {
			return sp.unlock(sp.calls, err)
		}
		removed, err1 := rest[0].asCount()
		left, err2 := rest[1].asCount()
		cursor, err3 := rest[2].asString()
		if err1 != nil || err2 != nil || err3 != nil {
			return sp.unlock(sp.calls, replyErr("shard sweep: %s", v))
		}
		sp.report.Removed += int(removed)
		sp.report.observe(now)
		if cursor == "0" {
			w.remaining += left
			continue
		}
		w.cursors[w.pending[i]] = cursor
		next = append(next, w.pending[i])
	}
	w.pending = next
	w.trips += waves(w.costs)
	return sp.walkShards()
}

// finishScope is the round of scope_finish.lua in the scope's bucket, with
// the sum of its shard sizes.
func (sp *sweepPlan) finishScope(remaining int64) (*round, error) {
	p, w := sp.p, &sp.walk
	bk := p.scopeBucketKeys(w.k.bucket)
	sp.state = sweepFinish
	return sp.plan.m.one("sweep scopes", Call{SHA: p.scripts.scopeFinish.sha, Keys: []string{bk[0], bk[1], w.k.count},
		Args: []string{sp.plan.m.now, w.ref, itoa(remaining), itoa(w.empties), strconv.Itoa(p.settings.release),
			itoa(p.settings.countTTL), itoa(w.k.cls.interval)}}), nil
}

// nextScope goes on with the reply's next spread scope, or, after its
// last, with the next reply.
func (sp *sweepPlan) nextScope() (*round, error) {
	if sp.si += 2; sp.si < len(sp.spread) {
		return sp.startScope()
	}
	sp.stepped(sp.stepMore, sp.stepLock)
	sp.at++
	return sp.read()
}

// fill returns n costs of c each.
func fill(n, c int) []int {
	costs := make([]int, n)
	for i := range costs {
		costs[i] = c
	}
	return costs
}
