package core

import "context"

// heartbeat runs a Heartbeat: one heartbeat (docs/design.md §5): the device is seen
// now, active now if hb.Active, backgrounded if hb.Background. Under
// PolicyMulti a device without a session is logged in implicitly. A
// refused heartbeat (ErrSessionReplaced, ErrNoSession, ErrTooManyDevices,
// ErrClockSkew, or an *InputError) changes nothing. A steady beat, one that
// only extends a live session, takes one round trip; any other takes two.
func (e *Engine) heartbeat(ctx context.Context, hb Heartbeat) (Ack, error) {
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
