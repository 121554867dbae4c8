package core

import (
	"context"
	"slices"
)

// This file is Engine as a driver of plans (plan.go): it makes their calls
// through its Store, supplies "now" from Config.Clock, reports their notes
// to Metrics and the Logger, and publishes their messages through the
// Store's Publisher once each plan has ended.

// drive steps one plan to its end over the store, one round trip per
// step, then publishes its messages. When ctx ends during a plan that can
// stop between its rounds (a sweep), the round under way is finished and
// the plan aborted at its end, the rest sent without ctx's cancellation.
func (e *Engine) drive(ctx context.Context, s Stepper) {
	m := s.machine()
	e.report(ctx, m)
	for !m.done {
		c := ctx
		if ctx.Err() != nil && m.midRound() {
			c = context.WithoutCancel(ctx)
		}
		res := e.store.Eval(c, m.calls())
		m.now = e.nowArg()
		_ = m.step(res) // a wrong number of results ends the plan with the error
		e.report(ctx, m)
		if !m.done && ctx.Err() != nil && m.abort(ctx.Err()) {
			ctx = context.WithoutCancel(ctx)
			e.report(ctx, m)
		}
	}
	e.deliver(ctx, m.pubs)
}

// beatAlone drives hb's plan alone, on a plan the engine reuses, and
// returns its outcome; checked is startBeat's.
func (e *Engine) beatAlone(ctx context.Context, hb Heartbeat, checked bool) (Ack, error) {
	bp := e.plans.pools.beatPlan()
	e.plans.startBeat(bp, e.nowArg(), hb, checked)
	e.drive(ctx, &bp.plan)
	ack, err := bp.plan.Outcome()
	e.plans.pools.release(bp)
	return ack, err
}

// beatsAlone drives the plan of beats, on a plan the engine reuses, and
// returns its outcome, the acks a copy of the plan's.
func (e *Engine) beatsAlone(ctx context.Context, beats []Heartbeat) ([]Ack, error) {
	bp := e.plans.pools.beatsPlan()
	e.plans.startBeats(bp, e.nowArg(), beats, false)
	e.drive(ctx, &bp.plan)
	acks, err := bp.plan.Outcome()
	acks = slices.Clone(acks) // the caller's: the plan's are reused
	e.plans.pools.release(bp)
	return acks, err
}

// Run steps plans (made by e.Planner()) together until every one has
// ended: each round sends the pending calls of all of them in one
// Store.Eval (one pipelined round trip where the store pipelines), but
// for calls of known cost (large batches, sweeps), which share a round
// trip up to about 1 ms of server time and otherwise wait for the next;
// it splits the results back, and steps each plan with its own. A plan's NOSCRIPT
// resend, next round or change log append joins the next shared round;
// the plans that end in a round deliver their messages in the next
// (publishing them and acknowledging their outbox entries together), and
// their outcomes are then ready (Stepper.Result). A plan aborted because ctx ended (a sweep
// between steps, after the round under way) sends its cleanup without
// ctx's cancellation, in a round trip of its own. Run is safe to call from several goroutines
// with distinct plans; a plan must be stepped by one driver only.
func (e *Engine) Run(ctx context.Context, plans ...Stepper) { e.run(ctx, plans, nil) }

// runState is the room a run of plans takes, reused by group commit's
// batches.
type runState struct {
	free    []bool // by plan: aborted, its calls go without ctx's cancellation
	in      []bool // by plan: in the round trip being made
	live    []int
	members []int
	ending  []int
	calls   []Call
	out     []Publication
}

// reset makes rs ready for n plans.
func (rs *runState) reset(n int) {
	rs.free = slices.Grow(rs.free[:0], n)[:n]
	rs.in = slices.Grow(rs.in[:0], n)[:n]
	clear(rs.free)
	rs.live, rs.members, rs.ending = rs.live[:0], rs.members[:0], rs.ending[:0]
	clear(rs.calls)
	clear(rs.out)
	rs.calls, rs.out = rs.calls[:0], rs.out[:0]
}

// run is Run; with a batch b, it tells b as soon as a plan has ended and
// published (b.ended, with its index), before the others end, and runs in
// b's room.
func (e *Engine) run(ctx context.Context, plans []Stepper, b *batch) {
	detached := ctx
	if ctx.Done() != nil {
		detached = context.WithoutCancel(ctx)
	}
	rs := new(runState)
	if b != nil {
		rs = &b.run
	}
	rs.reset(len(plans))
	for i, s := range plans {
		m := s.machine()
		e.report(ctx, m)
		if m.done {
			rs.out, rs.ending = append(rs.out, m.pubs...), append(rs.ending, i)
			continue
		}
		rs.live = append(rs.live, i)
	}
	e.deliverEnded(detached, rs, b)
	for turn := 0; len(rs.live) > 0; turn++ {
		for _, group := range [2]bool{false, true} {
			rs.calls, rs.members = rs.calls[:0], rs.members[:0]
			// the plans' waves of known cost share a round trip up to
			// roundMicros, starting with another plan each turn; the others
			// wait for the next
			budget, taken := roundMicros, 0
			clear(rs.in)
			for k := range rs.live {
				i := rs.live[(turn+k)%len(rs.live)]
				// a plan aborted, or midway through a round it may stop
				// after, goes on without ctx's cancellation
				m := plans[i].machine()
				if (rs.free[i] || (ctx.Err() != nil && m.midRound())) != group {
					continue
				}
				cost := m.sentCost()
				if cost > 0 && taken > 0 && cost > budget {
					continue
				}
				budget -= cost
				rs.in[i] = true
				taken++
			}
			for _, i := range rs.live { // in the plans' order, as ever
				if rs.in[i] {
					rs.calls = append(rs.calls, plans[i].machine().calls()...)
					rs.members = append(rs.members, i)
				}
			}
			if len(rs.members) == 0 {
				continue
			}
			c := ctx
			if group {
				c = detached
			}
			res := e.store.Eval(c, rs.calls)
			now := e.nowArg()
			at := 0
			for _, i := range rs.members {
				m := plans[i].machine()
				n := len(m.calls())
				part := res[min(at, len(res)):min(at+n, len(res))]
				if len(res) != len(rs.calls) {
					part = nil // the store broke its contract: every plan of the round fails
				}
				at += n
				m.now = now
				_ = m.step(part)
				e.report(c, m)
			}
		}
		next := rs.live[:0]
		for _, i := range rs.live {
			m := plans[i].machine()
			if !m.done && !rs.free[i] && ctx.Err() != nil && m.abort(ctx.Err()) {
				rs.free[i] = true
				e.report(detached, m)
			}
			if m.done {
				rs.out, rs.ending = append(rs.out, m.pubs...), append(rs.ending, i)
				continue
			}
			next = append(next, i)
		}
		e.deliverEnded(detached, rs, b)
		rs.live = next
	}
}

// deliverEnded delivers the messages of the plans that ended in a turn
// together, in one round trip, before their callers learn that they
// ended.
func (e *Engine) deliverEnded(ctx context.Context, rs *runState, b *batch) {
	e.deliver(ctx, rs.out)
	if b != nil {
		for _, i := range rs.ending {
			b.ended(i)
		}
	}
	clear(rs.out)
	rs.out, rs.ending = rs.out[:0], rs.ending[:0]
}

// report passes the plan's notes to the metrics and the logger.
func (e *Engine) report(ctx context.Context, m *machine) {
	for _, n := range m.takeNotes() {
		switch n.kind {
		case noteStoreError:
			e.metrics.Error(n.op, n.err)
		case noteLogFailed:
			e.metrics.Error("change log", n.err)
			if e.log != nil {
				e.log.WarnContext(ctx, "presence: change log append failed", "err", n.err)
			}
		case noteHeartbeats:
			e.metrics.Heartbeats(n.accepted, n.refused)
		case noteSwept:
			e.metrics.Swept(n.op, *n.report)
		}
	}
}

// publish announces a plan's messages through the store's Publisher, if
// it has one. The state change is already committed, so a failed publish
// is logged and counted, not returned.
func (e *Engine) publish(ctx context.Context, pubs []Publication) (delivered []string) {
	ok := true
	switch {
	case e.pub == nil:
	case e.batchPub != nil && len(pubs) > 1:
		ok = e.sendBatch(ctx, pubs)
	default:
		for _, p := range pubs {
			ok = e.send(ctx, p.Kind, p.Channel, p.Payload) && ok
		}
	}
	if !ok {
		return nil // the outbox keeps them: a sweep delivers them again
	}
	// Delivered (or nowhere to publish, with no Publisher): the outbox may
	// let them go.
	for _, p := range pubs {
		if p.ID != "" {
			delivered = append(delivered, p.ID)
		}
	}
	return delivered
}

// deliver publishes the messages of ended plans and acknowledges their
// events in one round trip: each call of lua/outbox_ack.lua publishes a
// bucket's messages and then deletes their events from its outbox, in one
// atomic step. A message that no outbox holds (its change log append
// failed) goes through the store's Publisher, unacknowledged. A failed
// delivery is logged and counted, not returned: the state change is
// committed, and the outbox keeps the events for a sweep to deliver again.
func (e *Engine) deliver(ctx context.Context, pubs []Publication) {
	if len(pubs) == 0 {
		return
	}
	calls, costs, rest := e.plans.outboxCalls(pubs)
	if len(rest) > 0 {
		e.publish(ctx, rest)
	}
	if len(calls) == 0 {
		return
	}
	p := &deliverPlan{plan: plan[struct{}]{m: machine{scripts: &e.plans.scripts, now: e.nowArg()}}}
	p.plan.m.start(p, &round{op: "publish", calls: calls, costs: costs}, nil)
	e.drive(ctx, &p.plan)
	if p.lost != nil {
		if e.log != nil {
			e.log.WarnContext(ctx, "presence: publish failed", "messages", len(pubs), "err", p.lost)
		}
		return
	}
	sent := map[string]int{}
	for _, pub := range pubs {
		if pub.Channel != "" && pub.ID != "" {
			sent[pub.Kind]++
		}
	}
	for kind, n := range sent {
		e.metrics.Published(kind, n)
	}
}
