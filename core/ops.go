package core

import (
	"context"
	"time"
)

// Each verb's three doors (op.go): its plan, its run on an Engine, its
// application to the Model.

func (hb Heartbeat) plan(pl *Planner, now string) Stepper {
	bp := pl.p.pools.beatPlan()
	pl.p.startBeat(bp, now, hb, false)
	return &bp.plan
}

// exec joins the engine's group commit, where a beat merges with its
// bucket's (combine.go), or else drives its own plan.
func (hb Heartbeat) exec(ctx context.Context, e *Engine) (Ack, error) {
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
	return e.beatAlone(ctx, hb, false)
}
func (hb Heartbeat) run(ctx context.Context, e *Engine) (any, error)  { return hb.exec(ctx, e) }
func (hb Heartbeat) apply(ctx context.Context, m *Model) (any, error) { return m.heartbeat(ctx, hb) }

func (b HeartbeatBatch) plan(pl *Planner, now string) Stepper {
	bp := pl.p.pools.beatsPlan()
	pl.p.startBeats(bp, now, b, false)
	return &bp.plan
}
func (b HeartbeatBatch) exec(ctx context.Context, e *Engine) ([]Ack, error) {
	return e.beatsAlone(ctx, b)
}
func (b HeartbeatBatch) run(ctx context.Context, e *Engine) (any, error) { return b.exec(ctx, e) }
func (b HeartbeatBatch) apply(ctx context.Context, m *Model) (any, error) {
	return m.heartbeatBatch(ctx, b)
}

func (l Login) plan(pl *Planner, now string) Stepper { return pl.p.login(now, l) }
func (l Login) exec(ctx context.Context, e *Engine) (LoginResult, error) {
	return drive[LoginResult](ctx, e, l, true)
}
func (l Login) run(ctx context.Context, e *Engine) (any, error)  { return l.exec(ctx, e) }
func (l Login) apply(ctx context.Context, m *Model) (any, error) { return m.login(ctx, l) }

func (o Logout) plan(pl *Planner, now string) Stepper {
	return pl.p.end(now, "logout", o.User, o.Device, o.Token)
}
func (o Logout) exec(ctx context.Context, e *Engine) (Ended, error) {
	return drive[Ended](ctx, e, o, true)
}
func (o Logout) run(ctx context.Context, e *Engine) (any, error) { return o.exec(ctx, e) }
func (o Logout) apply(ctx context.Context, m *Model) (any, error) {
	return m.logout(ctx, o.User, o.Device, o.Token)
}

func (d Disconnect) plan(pl *Planner, now string) Stepper {
	return pl.p.end(now, "disconnect", d.User, d.Device, d.Token)
}
func (d Disconnect) exec(ctx context.Context, e *Engine) (Ended, error) {
	return drive[Ended](ctx, e, d, true)
}
func (d Disconnect) run(ctx context.Context, e *Engine) (any, error) { return d.exec(ctx, e) }
func (d Disconnect) apply(ctx context.Context, m *Model) (any, error) {
	return m.disconnect(ctx, d.User, d.Device, d.Token)
}

func (s SetManual) plan(pl *Planner, now string) Stepper {
	return pl.p.setManual(now, s.User, s.Manual, s.TTL)
}
func (s SetManual) exec(ctx context.Context, e *Engine) ([]Change, error) {
	return drive[[]Change](ctx, e, s, true)
}
func (s SetManual) run(ctx context.Context, e *Engine) (any, error) { return s.exec(ctx, e) }
func (s SetManual) apply(ctx context.Context, m *Model) (any, error) {
	return m.setManual(ctx, s.User, s.Manual, s.TTL)
}

func (r ReadStatus) plan(pl *Planner, now string) Stepper { return pl.p.status(now, r.User) }
func (r ReadStatus) exec(ctx context.Context, e *Engine) (UserStatus, error) {
	return e.status(ctx, r.User)
}
func (r ReadStatus) run(ctx context.Context, e *Engine) (any, error) { return r.exec(ctx, e) }
func (r ReadStatus) apply(ctx context.Context, m *Model) (any, error) {
	return m.status(ctx, r.User)
}

func (r ReadStatuses) plan(pl *Planner, now string) Stepper { return pl.p.statuses(now, r.Users) }
func (r ReadStatuses) exec(ctx context.Context, e *Engine) ([]UserStatus, error) {
	return drive[[]UserStatus](ctx, e, r, false)
}
func (r ReadStatuses) run(ctx context.Context, e *Engine) (any, error) { return r.exec(ctx, e) }
func (r ReadStatuses) apply(ctx context.Context, m *Model) (any, error) {
	return m.statuses(ctx, r.Users)
}

func (t ScopeTouch) plan(pl *Planner, now string) Stepper { return pl.p.touch(now, t.Scope, t.Member) }
func (t ScopeTouch) exec(ctx context.Context, e *Engine) error {
	_, err := drive[struct{}](ctx, e, t, true)
	return err
}
func (t ScopeTouch) run(ctx context.Context, e *Engine) (any, error) { return nil, t.exec(ctx, e) }
func (t ScopeTouch) apply(ctx context.Context, m *Model) (any, error) {
	return nil, m.touch(ctx, t.Scope, t.Member)
}

func (b TouchBatch) plan(pl *Planner, now string) Stepper { return pl.p.touchBatch(now, b) }
func (b TouchBatch) exec(ctx context.Context, e *Engine) error {
	_, err := drive[struct{}](ctx, e, b, false)
	return err
}
func (b TouchBatch) run(ctx context.Context, e *Engine) (any, error) { return nil, b.exec(ctx, e) }
func (b TouchBatch) apply(ctx context.Context, m *Model) (any, error) {
	return nil, m.touchBatch(ctx, b)
}

func (l Leave) plan(pl *Planner, now string) Stepper { return pl.p.leave(now, l.Scope, l.Member) }
func (l Leave) exec(ctx context.Context, e *Engine) (bool, error) {
	return drive[bool](ctx, e, l, true)
}
func (l Leave) run(ctx context.Context, e *Engine) (any, error) { return l.exec(ctx, e) }
func (l Leave) apply(ctx context.Context, m *Model) (any, error) {
	return m.leave(ctx, l.Scope, l.Member)
}

func (r ReadCount) plan(pl *Planner, now string) Stepper { return pl.p.count(now, r.Scope) }
func (r ReadCount) exec(ctx context.Context, e *Engine) (Count, error) {
	return e.readCount(ctx, r.Scope)
}
func (r ReadCount) run(ctx context.Context, e *Engine) (any, error)  { return r.exec(ctx, e) }
func (r ReadCount) apply(ctx context.Context, m *Model) (any, error) { return m.count(ctx, r.Scope) }

func (r ReadMembers) plan(pl *Planner, now string) Stepper {
	return pl.p.members(now, r.Scope, r.Cursor, r.Limit)
}
func (r ReadMembers) exec(ctx context.Context, e *Engine) (MemberPage, error) {
	return drive[MemberPage](ctx, e, r, false)
}
func (r ReadMembers) run(ctx context.Context, e *Engine) (any, error) { return r.exec(ctx, e) }
func (r ReadMembers) apply(ctx context.Context, m *Model) (any, error) {
	return m.members(ctx, r.Scope, r.Cursor, r.Limit)
}

func (r ReadActive) plan(pl *Planner, now string) Stepper {
	return pl.p.activeWithin(now, r.Scope, r.Within)
}
func (r ReadActive) exec(ctx context.Context, e *Engine) (int64, error) {
	return drive[int64](ctx, e, r, false)
}
func (r ReadActive) run(ctx context.Context, e *Engine) (any, error) { return r.exec(ctx, e) }
func (r ReadActive) apply(ctx context.Context, m *Model) (any, error) {
	return m.activeWithin(ctx, r.Scope, r.Within)
}

func (r ReadOnline) plan(pl *Planner, now string) Stepper { return pl.p.online(now) }
func (r ReadOnline) exec(ctx context.Context, e *Engine) (map[Status]int64, error) {
	return drive[map[Status]int64](ctx, e, r, false)
}
func (r ReadOnline) run(ctx context.Context, e *Engine) (any, error)  { return r.exec(ctx, e) }
func (r ReadOnline) apply(ctx context.Context, m *Model) (any, error) { return m.online(ctx) }

func (s SweepUsers) plan(pl *Planner, now string) Stepper { return pl.p.sweepUsers(now) }
func (s SweepUsers) exec(ctx context.Context, e *Engine) (SweepReport, error) {
	return drive[SweepReport](ctx, e, s, false)
}
func (s SweepUsers) run(ctx context.Context, e *Engine) (any, error)  { return s.exec(ctx, e) }
func (s SweepUsers) apply(ctx context.Context, m *Model) (any, error) { return m.sweepUsers(ctx) }

func (s SweepScopes) plan(pl *Planner, now string) Stepper { return pl.p.sweepScopes(now) }
func (s SweepScopes) exec(ctx context.Context, e *Engine) (SweepReport, error) {
	return e.sweepScopes(ctx)
}
func (s SweepScopes) run(ctx context.Context, e *Engine) (any, error) { return s.exec(ctx, e) }
func (s SweepScopes) apply(ctx context.Context, m *Model) (any, error) {
	return m.sweepScopes(ctx)
}

func (r ReadChangeLog) plan(pl *Planner, now string) Stepper {
	return pl.p.changeLogAfter(now, r.After, r.Limit)
}
func (r ReadChangeLog) exec(ctx context.Context, e *Engine) (LogPage, error) {
	return drive[LogPage](ctx, e, r, false)
}
func (r ReadChangeLog) run(ctx context.Context, e *Engine) (any, error) { return r.exec(ctx, e) }
func (r ReadChangeLog) apply(context.Context, *Model) (any, error) {
	return nil, modelUnsupported("change log")
}

func (a AppendLog) plan(pl *Planner, _ string) Stepper { return pl.p.appendLog(a.Changes, a.Kicks) }
func (a AppendLog) exec(ctx context.Context, e *Engine) error {
	_, err := drive[struct{}](ctx, e, a, false)
	return err
}
func (a AppendLog) run(ctx context.Context, e *Engine) (any, error) { return nil, a.exec(ctx, e) }
func (a AppendLog) apply(context.Context, *Model) (any, error) {
	return nil, modelUnsupported("change log")
}

func (a AckEvents) plan(pl *Planner, now string) Stepper { return pl.p.ack(now, a.IDs) }
func (a AckEvents) exec(ctx context.Context, e *Engine) error {
	_, err := drive[struct{}](ctx, e, a, false)
	return err
}
func (a AckEvents) run(ctx context.Context, e *Engine) (any, error) { return nil, a.exec(ctx, e) }
func (a AckEvents) apply(context.Context, *Model) (any, error) {
	return nil, modelUnsupported("outbox")
}

func (p Ping) plan(pl *Planner, _ string) Stepper { return pl.p.ping() }
func (p Ping) exec(ctx context.Context, e *Engine) (time.Time, error) {
	return drive[time.Time](ctx, e, p, false)
}
func (p Ping) run(ctx context.Context, e *Engine) (any, error) { return p.exec(ctx, e) }
func (p Ping) apply(_ context.Context, m *Model) (any, error) {
	return m.settings.cfg.Clock().Truncate(time.Millisecond), nil
}

// modelUnsupported is the model's error for what only Redis keeps.
func modelUnsupported(what string) error {
	return &wrapError{msg: "presence: the model keeps no " + what, err: ErrUnsupported}
}
