package core

import "sync"

// planPools hold ended heartbeat plans for reuse: the engine's own, and
// those a driver hands back (Planner.Release), so that steady beats
// allocate next to nothing in the core whoever drives them.
type planPools struct {
	beat  sync.Pool // of *beatPlan
	beats sync.Pool // of *beatsPlan
}

// beatPlan returns a heartbeat's plan to start, reused where one is free.
func (pp *planPools) beatPlan() *beatPlan {
	if bp, ok := pp.beat.Get().(*beatPlan); ok {
		return bp
	}
	return new(beatPlan)
}

// beatsPlan returns a HeartbeatBatch's plan to start, reused where one is
// free.
func (pp *planPools) beatsPlan() *beatsPlan {
	if bp, ok := pp.beats.Get().(*beatsPlan); ok {
		return bp
	}
	return new(beatsPlan)
}

// release takes back the plan of b, a body that has ended and whose
// outcome its driver has read. The plans of other operations are left to
// the garbage collector.
func (pp *planPools) release(b body) {
	switch bp := b.(type) {
	case *beatPlan:
		pp.beat.Put(bp)
	case *beatsPlan:
		clear(bp.acks)
		bp.plan.out, bp.beats = nil, nil
		pp.beats.Put(bp)
	}
}

// Release hands back a plan of this planner that has ended and whose
// outcome and messages its driver is done with: a later plan may be made
// in its room, so a driver stepping many heartbeats allocates little.
// Neither the plan nor its outcome (a batch's []Ack) may be used after. A
// plan that has not ended is left alone.
func (pl *Planner) Release(s Stepper) {
	if m := s.machine(); m.done {
		pl.p.pools.release(m.body)
	}
}
