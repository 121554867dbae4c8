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

// SweepUsers plans Engine.SweepUsers at now; the pass's lock token is
// drawn when the plan is made.
func (pl *Planner) sweepUsers(now string) *plan[SweepReport] {
	p := pl.p
	plan := newPlan[SweepReport](p, now)
	n := int(p.settings.keys.userBuckets)
	redelivered := map[string]struct{}{} // outbox IDs this pass delivers again
	p.sweep(plan, "users", n, func(now string, b uint32, token string, probe bool) (Call, int) {
		limit, cost := p.settings.batch, sweepStepMicros+sweepOverrunMicros
		if probe {
			// the first round visits every bucket: a few users each, so
			// that it fits in one round trip whatever is due
			limit = min(limit, max(1, sweepProbeUsers/n))
			cost = min(cost, sweepOverheadMicros+limit*sweepUserMicros)
		}
		args := append(p.userArgs(now, b, 5), token, itoa(p.settings.lease), strconv.Itoa(limit), itoa(sweepStepMicros),
			itoa(RedeliverAfter.Milliseconds()))
		return Call{SHA: p.scripts.sweepUsers.sha, Keys: p.settings.users[b].sweep, Args: args}, cost
	}, func(v Value, r *SweepReport, fail func(error) (*round, error), then func(more bool, lock string) (*round, error)) (*round, error) {
		now, rest, err := splitReply(v, 5)
		if err != nil {
			return fail(err)
		}
		visited, err1 := rest[0].asCount()
		more, err2 := rest[1].asInt()
		lock, err3 := rest[2].asString()
		if err1 != nil || err2 != nil || err3 != nil {
			return fail(replyErr("sweep: %s", v))
		}
		changes, ids, err := decodeChanges(rest[3], now)
		if err != nil {
			return fail(err)
		}
		again, err := decodeOutbox(rest[4])
		if err != nil {
			return fail(err)
		}
		r.Visited += int(visited)
		r.Changes = append(r.Changes, changes...)
		plan.m.deliver(changes, ids, nil, nil)
		// Every step of a bucket reports the same waiting events: deliver
		// each once per pass.
		for _, d := range again {
			if _, dup := redelivered[d.id]; !dup {
				redelivered[d.id] = struct{}{}
				plan.m.out = append(plan.m.out, d)
			}
		}
		r.observe(now)
		return then(more == 1, lock)
	})
	return plan
}

// SweepScopes plans Engine.SweepScopes at now; the pass's lock token is
// drawn when the plan is made. The client-side cache's fence at the end is
// the driver's (CachedReader.FenceCache).
func (pl *Planner) sweepScopes(now string) *plan[SweepReport] {
	p := pl.p
	plan := newPlan[SweepReport](p, now)
	m := &plan.m
	n := int(p.settings.keys.scopeBuckets)
	classes := make([]string, 0, 1+7*len(p.settings.classNames))
	classes = append(classes, strconv.Itoa(len(p.settings.classNames)))
	for _, name := range p.settings.classNames {
		c := p.settings.classes[name]
		classes = append(classes, name, strconv.Itoa(int(c.layout)), itoa(c.window), strconv.Itoa(c.shardSize),
			itoa(c.interval), itoa(c.bucket), flag(c.spread))
	}
	p.sweep(plan, "scopes", n, func(now string, b uint32, token string, probe bool) (Call, int) {
		budget := p.settings.budget
		if probe {
			// the first round visits every bucket: a few entries each
			budget = min(budget, max(1, (roundMicros/n-sweepOverheadMicros)/sweepEntryMicros))
		}
		args := append(make([]string, 0, 12+len(classes)), now, token, itoa(p.settings.lease),
			strconv.Itoa(p.settings.batch), strconv.Itoa(budget), strconv.Itoa(p.settings.release), itoa(p.settings.countTTL),
			p.settings.keys.scopeBase(b), sufExact, sufCompact, sufHLL, sufCount)
		return Call{SHA: p.scripts.sweepScopes.sha, Keys: p.scopeBucketKeys(b), Args: append(args, classes...)},
			sweepOverheadMicros + budget*sweepEntryMicros
	}, func(v Value, r *SweepReport, fail func(error) (*round, error), then func(more bool, lock string) (*round, error)) (*round, error) {
		now, rest, err := splitReply(v, 6)
		if err != nil {
			return fail(err)
		}
		var n [4]int64
		for i := range n {
			if n[i], err = rest[i].asCount(); err != nil {
				return fail(err)
			}
		}
		lock, err := rest[4].asString()
		if err != nil {
			return fail(err)
		}
		r.Visited += int(n[0])
		r.Removed += int(n[1])
		r.Released += int(n[2])
		r.observe(now)
		return p.sweepSpread(m, rest[5], r, fail, func() (*round, error) { return then(n[3] == 1, lock) })
	})
	return plan
}

// sweepSpread sweeps the spread compact scopes a bucket step handed over
// (ref, empty sweeps, …), one after the other: its shards in bounded steps
// (sweepShards), then scope_finish.lua in the bucket's slot with the sum of
// the shard sizes, then, for a released scope, the shards that are still
// empty. Then it goes on with then.
func (p *planner) sweepSpread(m *machine, v Value, r *SweepReport, fail func(error) (*round, error),
	then func() (*round, error)) (*round, error) {
	items, err := v.asArray(-1)
	if err != nil || len(items)%2 != 0 {
		return fail(replyErr("spread scopes: %s", v))
	}
	var scope func(i int) (*round, error)
	scope = func(i int) (*round, error) {
		if i == len(items) {
			return then()
		}
		ref, err1 := items[i].asString()
		empties, err2 := items[i+1].asCount()
		class, id, ok := strings.Cut(ref, ":")
		if err1 != nil || err2 != nil || !ok {
			return fail(replyErr("spread scope %s", v))
		}
		k, err := p.scopeKeys("scope", Scope{Class: class, ID: id})
		if err != nil || !k.cls.spread {
			return fail(replyErr("spread scope %q is not a spread class", ref))
		}
		return p.sweepShards(m, k, r, fail, func(remaining int64, steps int) (*round, error) {
			bk := p.scopeBucketKeys(k.bucket)
			finish := Call{SHA: p.scripts.scopeFinish.sha, Keys: []string{bk[0], bk[1], k.count},
				Args: []string{m.now, ref, itoa(remaining), itoa(empties), strconv.Itoa(p.settings.release), itoa(p.settings.countTTL), itoa(k.cls.interval)}}
			return &round{op: "sweep scopes", calls: []Call{finish}, onErr: fail, next: func(vals []Value) (*round, error) {
				if released, err := vals[0].asInt(); err != nil || released == 0 {
					r.Steps += steps + 1
					return scope(i + 2)
				}
				r.Released++
				calls := make([]Call, k.cls.shards)
				for n := range calls {
					calls[n] = Call{SHA: p.scripts.shardDrop.sha, Keys: []string{k.shardKeyN(n)}}
				}
				return &round{op: "sweep scopes", calls: calls, costs: fill(len(calls), shardCallMicros), onErr: fail, next: func([]Value) (*round, error) {
					r.Steps += steps + len(calls) + 1
					return scope(i + 2)
				}}, nil
			}}, nil
		})
	}
	return scope(0)
}

// sweepShards sweeps every shard of a spread compact scope in bounded
// steps (shard_sweep.lua, one HSCAN step each): all shards in one round
// (sent about 1 ms a round trip), then further rounds for the shards not
// yet walked to their end. It goes on with the sum of the shard sizes
// (taken as each walk ended when one round trip walked them all, else
// counted again once all are walked) and the number of steps.
func (p *planner) sweepShards(m *machine, k scopeKeys, r *SweepReport, fail func(error) (*round, error),
	then func(remaining int64, steps int) (*round, error)) (*round, error) {
	scan := min(p.settings.budget, shardScan)
	count, win := strconv.Itoa(scan), itoa(k.cls.window)
	pending := make([]int, k.cls.shards)
	cursors := make([]string, k.cls.shards)
	for n := range pending {
		pending[n], cursors[n] = n, "0"
	}
	var remaining int64
	steps, trips := 0, 0
	var step func() (*round, error)
	step = func() (*round, error) {
		if len(pending) == 0 {
			if trips > 1 {
				// a walk took several round trips (rounds, or waves of one):
				// a member touched meanwhile into a shard walked earlier is in
				// no shard's remainder, so count again
				steps += k.cls.shards
				return p.shardSizes("sweep scopes", k, fail, func(sum int64) (*round, error) { return then(sum, steps) })
			}
			return then(remaining, steps)
		}
		calls := make([]Call, len(pending))
		for i, n := range pending {
			calls[i] = Call{SHA: p.scripts.shardSweep.sha, Keys: []string{k.shardKeyN(n)}, Args: []string{m.now, win, cursors[n], count}}
		}
		costs := fill(len(calls), sweepOverheadMicros+scan*sweepEntryMicros)
		return &round{op: "sweep scopes", calls: calls, costs: costs, onErr: fail, next: func(vals []Value) (*round, error) {
			steps += len(calls)
			next := pending[:0]
			for i, v := range vals {
				now, rest, err := splitReply(v, 3)
				if err != nil {
					return fail(err)
				}
				removed, err1 := rest[0].asCount()
				left, err2 := rest[1].asCount()
				cursor, err3 := rest[2].asString()
				if err1 != nil || err2 != nil || err3 != nil {
					return fail(replyErr("shard sweep: %s", v))
				}
				r.Removed += int(removed)
				r.observe(now)
				if cursor == "0" {
					remaining += left
					continue
				}
				cursors[pending[i]] = cursor
				next = append(next, pending[i])
			}
			pending = next
			trips += waves(costs)
			return step()
		}}, nil
	}
	return step()
}

// sweep plans the steps of a pass into plan: one round over all buckets
// whose steps are small (probe), so that it fits in one round trip, then
// further rounds of full steps for the buckets that have more to do, sent
// a few at a time (round.costs), so that Redis serves other clients
// between them. step returns a bucket's call and its estimated cost; read
// takes one step's reply and goes on with then (or fail), perhaps through
// rounds of its own. On failure the pass releases the locks it may hold,
// and the plan ends with the report so far and the error. A driver may
// abort the pass between its bucket rounds (round.abort): it then
// releases its locks too.
func (p *planner) sweep(plan *plan[SweepReport], kind string, buckets int,
	step func(now string, b uint32, token string, probe bool) (Call, int),
	read func(v Value, r *SweepReport, fail func(error) (*round, error), then func(more bool, lock string) (*round, error)) (*round, error)) {
	m := &plan.m
	token, err := p.newToken()
	if err != nil {
		m.fail(err)
		return
	}
	r := &SweepReport{Buckets: buckets}
	pending := make([]uint32, buckets)
	for i := range pending {
		pending[i] = uint32(i)
	}
	// unlock releases this pass's locks (the last key of each step call),
	// then ends the plan with the report so far and err.
	unlock := func(steps []Call, err error) (*round, error) {
		plan.out = *r
		calls := make([]Call, len(steps))
		for i, s := range steps {
			calls[i] = Call{SHA: p.scripts.unlock.sha, Keys: s.Keys[len(s.Keys)-1:], Args: []string{token}}
		}
		end := func(error) (*round, error) { return nil, err }
		return &round{op: "unlock", calls: calls, onErr: end, next: func([]Value) (*round, error) { return nil, err }}, nil
	}
	var send func(prev []Call) (*round, error)
	send = func(prev []Call) (*round, error) {
		calls := make([]Call, len(pending))
		costs := make([]int, len(pending))
		for i, b := range pending {
			calls[i], costs[i] = step(m.now, b, token, prev == nil)
		}
		fail := func(err error) (*round, error) { return unlock(calls, err) }
		rd := &round{op: "sweep " + kind, calls: calls, costs: costs, onErr: fail}
		if prev != nil {
			rd.abort = func(err error) (*round, error) { return unlock(prev, err) }
		}
		rd.next = func(vals []Value) (*round, error) {
			vals = slices.Clone(vals) // read may take rounds of its own
			r.Steps += len(calls)
			next := pending[:0]
			var each func(i int) (*round, error)
			each = func(i int) (*round, error) {
				if i == len(vals) {
					pending = next
					if len(pending) > 0 {
						return send(calls)
					}
					report := *r
					m.note(note{kind: noteSwept, op: kind, report: &report})
					plan.out = *r
					return p.finish(m, nil)
				}
				return read(vals[i], r, fail, func(more bool, lock string) (*round, error) {
					switch {
					case lock == "held":
						r.Held++
					case more:
						next = append(next, pending[i])
					}
					return each(i + 1)
				})
			}
			return each(0)
		}
		return rd, nil
	}
	m.settle(send(nil))
}

// fill returns n costs of c each.
func fill(n, c int) []int {
	costs := make([]int, n)
	for i := range costs {
		costs[i] = c
	}
	return costs
}
