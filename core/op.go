package core

import (
	"context"
	"time"
)

// Op is an operation as a value (docs/design.md §2): one of this package's
// verb types, from Heartbeat to Ping. It has one door in each layer:
// Planner.Plan makes its plan, Engine.Do runs it over Redis and Model.Do
// applies it to the reference model; Engine's typed methods are shorthands
// for Do. Only this package implements Op.
type Op interface {
	// plan makes the operation's plan at now (nowArg form).
	plan(pl *Planner, now string) Stepper
	// run runs it on e, as Engine.Do.
	run(ctx context.Context, e *Engine) (any, error)
	// apply applies it to m, as Model.Do.
	apply(ctx context.Context, m *Model) (any, error)
}

// Plan makes the plan of op at now, for a driver to step. The zero now lets
// each script read the server's clock (as an engine without Config.Clock
// does). Tokens are drawn from Config.Rand when the plan is made.
func (pl *Planner) Plan(op Op, now time.Time) Stepper { return op.plan(pl, pl.p.nowOf(now)) }

// Do runs op and returns its outcome, whose type is given on each Op type
// (an Ack for a Heartbeat, a LoginResult for a Login…). Engine's typed
// methods are shorthands for it.
func (e *Engine) Do(ctx context.Context, op Op) (any, error) { return op.run(ctx, e) }

// Do applies op to the model and returns what Engine.Do returns for it.
func (m *Model) Do(ctx context.Context, op Op) (any, error) { return op.apply(ctx, m) }

// drive runs op's plan on e with the engine's clock, through group commit
// when grouped, and returns its outcome.
func drive[T any](ctx context.Context, e *Engine, op Op, grouped bool) (T, error) {
	p := op.plan(e.Planner(), e.nowArg())
	if !grouped {
		e.drive(ctx, p)
	} else if err := e.exec(ctx, p); err != nil {
		var zero T
		return zero, err
	}
	return p.(outcomer[T]).Outcome()
}

// outcomer is a plan whose outcome is a T: every Stepper of an operation
// whose outcome is a T.
type outcomer[T any] interface {
	Outcome() (T, error)
}

// HeartbeatBatch is up to MaxBatch heartbeats as one operation, as a
// gateway merging the beats of one tick sends them. Its outcome is a []Ack,
// in order.
type HeartbeatBatch []Heartbeat

// Logout ends a device's session because the user logged out. Its outcome
// is an Ended.
type Logout struct{ User, Device, Token string }

// Disconnect ends a device's session because its transport closed. Its
// outcome is an Ended.
type Disconnect struct{ User, Device, Token string }

// SetManual sets a user's manual status for TTL (0: until cleared). Its
// outcome is the []Change it published.
type SetManual struct {
	User   string
	Manual Manual
	TTL    time.Duration
}

// ReadStatus reads one user's status. Its outcome is a UserStatus.
type ReadStatus struct{ User string }

// ReadStatuses reads up to MaxBatch users' statuses. Its outcome is a
// []UserStatus, in the order asked.
type ReadStatuses struct{ Users []string }

// TouchBatch is up to MaxBatch scope touches as one operation. Its outcome
// is nil.
type TouchBatch []ScopeTouch

// Leave removes a member from a scope. Its outcome is a bool: whether the
// member was there.
type Leave struct {
	Scope  Scope
	Member string
}

// ReadCount reads a scope's member count. Its outcome is a Count.
type ReadCount struct{ Scope Scope }

// ReadMembers reads one page of a scope's members from Cursor ("" for the
// first page). Its outcome is a MemberPage.
type ReadMembers struct {
	Scope  Scope
	Cursor string
	Limit  int
}

// ReadActive counts a scope's members touched within the last Within. Its
// outcome is an int64.
type ReadActive struct {
	Scope  Scope
	Within time.Duration
}

// ReadOnline counts the users in each published status. Its outcome is a
// map[Status]int64.
type ReadOnline struct{}

// SweepUsers is one sweep pass over the user buckets. Its outcome is a
// SweepReport.
type SweepUsers struct{}

// SweepScopes is one sweep pass over the scope buckets. Its outcome is a
// SweepReport.
type SweepScopes struct{}

// ReadChangeLog reads up to Limit change log entries logged after the entry
// with ID After. Its outcome is a LogPage.
type ReadChangeLog struct {
	After string
	Limit int
}

// AppendLog appends changes and kicks a driver made itself to the change
// log. Its outcome is nil; the model does not keep a log (ErrUnsupported).
type AppendLog struct {
	Changes []Change
	Kicks   []Kick
}

// AckEvents acknowledges delivered events by their outbox IDs
// (Publication.ID), as a driver that publishes a plan's messages itself
// does once they are out. Its outcome is nil; the model has no outbox
// (ErrUnsupported).
type AckEvents struct{ IDs []string }

// Ping checks that Redis runs scripts. Its outcome is the server's clock, a
// time.Time; the model answers with its own clock.
type Ping struct{}
