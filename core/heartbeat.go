package core

import "context"

// Heartbeat records one heartbeat (docs/design.md §5): the device is seen
// now, active now if hb.Active, backgrounded if hb.Background. Under
// PolicyMulti a device without a session is logged in implicitly. A
// refused heartbeat (ErrSessionReplaced, ErrNoSession, ErrTooManyDevices,
// ErrClockSkew, or an *InputError) changes nothing. A steady beat, one that
// only extends a live session, takes one round trip; any other takes two.
func (e *Engine) Heartbeat(ctx context.Context, hb Heartbeat) (Ack, error) {
	if e.groupCommit() && e.plans.checkHeartbeat(hb) == nil {
		j := e.comb.newJob(ctx, jobBeat, "heartbeat")
		j.hb = hb
		if err := e.commit(j); err != nil {
			return Ack{}, err
		}
		ack, err := j.ack, j.err
		e.comb.release(j)
		return ack, err
	}
	p := e.plans.heartbeat(e.nowArg(), hb)
	e.drive(ctx, p)
	return p.Outcome()
}

// HeartbeatBatch records up to MaxBatch heartbeats, as a gateway merging
// the beats of one tick does: a round of steady beats
// (lua/heartbeat_steady.lua), then one of the beats that change something
// or are refused (lua/heartbeat_full.lua), each in calls of one user
// bucket and at most about 0.5 ms (a user's beats in one call), sent about
// 1 ms a round trip. Each
// beat's refusal is in its Ack.Err; the error is for the batch as a whole
// (invalid batch size, Redis unavailable).
func (e *Engine) HeartbeatBatch(ctx context.Context, beats []Heartbeat) ([]Ack, error) {
	p := e.plans.heartbeatBatch(e.nowArg(), beats)
	e.drive(ctx, p)
	return p.Outcome()
}
