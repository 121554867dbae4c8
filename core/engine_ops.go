package core

import (
	"context"
	"time"
)

// Engine's typed methods: each is a shorthand for Do with one Op value
// (op.go), kept for the callers who know which verb they run.

// Heartbeat records one heartbeat (docs/design.md §5): the device is seen
// now, active now if hb.Active, backgrounded if hb.Background. Under
// PolicyMulti a device without a session is logged in implicitly. A
// refused heartbeat (ErrSessionReplaced, ErrNoSession, ErrTooManyDevices,
// ErrClockSkew, or an *InputError) changes nothing. A steady beat, one that
// only extends a live session, takes one round trip; one that changes a
// status two (its call decides it, then the delivery).
func (e *Engine) Heartbeat(ctx context.Context, hb Heartbeat) (Ack, error) {
	return hb.exec(ctx, e)
}

// HeartbeatBatch records up to MaxBatch heartbeats, as a gateway merging
// the beats of one tick does: a round of steady beats, whose calls decide
// the first few of the beats that change something or are refused, then,
// if any is left, one of those left, each in bounded calls of one user
// bucket (a user's beats in one call). Each beat's refusal is in its
// Ack.Err; the error is for the batch as a whole (invalid batch size, Redis
// unavailable).
func (e *Engine) HeartbeatBatch(ctx context.Context, beats []Heartbeat) ([]Ack, error) {
	return HeartbeatBatch(beats).exec(ctx, e)
}

// Login logs a device in under the policy (docs/design.md §8) and returns a
// new session token. Sessions the policy removes, and an earlier session of
// the same device, are kicked: returned, marked so that their tokens are
// refused, and announced on their gateways' kick channels. A login beyond
// Config.MaxDevices is refused with ErrTooManyDevices and changes nothing.
func (e *Engine) Login(ctx context.Context, l Login) (LoginResult, error) {
	return l.exec(ctx, e)
}

// Logout ends a device's session because the user logged out. If it was
// the user's last live device, OFFLINE is published at once. A non-empty
// token must be the session's (else ErrSessionReplaced: a stale client
// cannot end a newer session); the token then stays refused.
func (e *Engine) Logout(ctx context.Context, user, device, token string) (Ended, error) {
	return Logout{user, device, token}.exec(ctx, e)
}

// Disconnect ends a device's session because its transport closed. If it
// was the user's last live device, OFFLINE is published only after the user
// stays offline for LeaveDelay, so a quick reconnect publishes nothing.
func (e *Engine) Disconnect(ctx context.Context, user, device, token string) (Ended, error) {
	return Disconnect{user, device, token}.exec(ctx, e)
}

// SetManual sets the user's manual status (ManualNone clears it) for ttl,
// or until cleared when ttl is 0 (docs/design.md §6). A manual status never
// makes anyone online.
func (e *Engine) SetManual(ctx context.Context, user string, m Manual, ttl time.Duration) ([]Change, error) {
	return SetManual{user, m, ttl}.exec(ctx, e)
}

// Status returns one user's status and live devices.
func (e *Engine) Status(ctx context.Context, user string) (UserStatus, error) {
	return ReadStatus{user}.exec(ctx, e)
}

// Statuses returns up to MaxBatch users' statuses, in the order asked, in
// bounded read-only calls of one user bucket each, so that other clients
// wait on none for long.
func (e *Engine) Statuses(ctx context.Context, users []string) ([]UserStatus, error) {
	return ReadStatuses{users}.exec(ctx, e)
}

// Touch records member's activity in the scope now (docs/design.md §9).
func (e *Engine) Touch(ctx context.Context, sc Scope, member string) error {
	return ScopeTouch{sc, member}.exec(ctx, e)
}

// TouchBatch records up to MaxBatch touches, in bounded calls of one scope
// bucket (or spread shard) each. Nothing is sent if any touch is invalid.
func (e *Engine) TouchBatch(ctx context.Context, touches []ScopeTouch) error {
	return TouchBatch(touches).exec(ctx, e)
}

// Leave removes member from the scope at once. It reports whether the
// member was there. Approx scopes cannot forget a member: ErrUnsupported.
func (e *Engine) Leave(ctx context.Context, sc Scope, member string) (bool, error) {
	return Leave{sc, member}.exec(ctx, e)
}

// Count returns the scope's member count: live for exact and approx scopes;
// for compact scopes, the count the last sweep wrote, read through the
// store's client-side cache when it has one. When Redis cannot be reached
// it returns the last good count marked Stale, or the error if it has none.
func (e *Engine) Count(ctx context.Context, sc Scope) (Count, error) {
	return ReadCount{sc}.exec(ctx, e)
}

// Members returns one page of the scope's live members: by recency for
// exact scopes, shard by shard for compact ones. cursor is "" for the first
// page, then the page's Next. Approx scopes cannot list: ErrUnsupported.
func (e *Engine) Members(ctx context.Context, sc Scope, cursor string, limit int) (MemberPage, error) {
	return ReadMembers{sc, cursor, limit}.exec(ctx, e)
}

// ActiveWithin counts the scope's members touched within the last d, which
// must be positive and at most the class's window. Approx scopes count whole
// buckets, so they may include members up to one bucket older.
func (e *Engine) ActiveWithin(ctx context.Context, sc Scope, d time.Duration) (int64, error) {
	return ReadActive{sc, d}.exec(ctx, e)
}

// Online returns how many users are in each published status but
// StatusOffline, which is not counted, across every instance
// sharing the Redis. The counts follow the published changes, in the same
// scripts that publish them, so they move with the debounce of
// docs/design.md §7 and never require a scan. One round trip.
func (e *Engine) Online(ctx context.Context) (map[Status]int64, error) {
	return ReadOnline{}.exec(ctx, e)
}

// SweepUsers runs one sweep pass over every user bucket (docs/design.md §10):
// each bucket takes one cheap call when nothing is due; otherwise bounded
// steps settle due users (expired devices deleted after a re-check inside
// the script, pending changes published, idle devices turned AWAY) until
// none is due. A bucket whose lock another sweeper holds is skipped;
// correctness never depends on the lock.
func (e *Engine) SweepUsers(ctx context.Context) (SweepReport, error) {
	return SweepUsers{}.exec(ctx, e)
}

// SweepScopes runs one sweep pass over every scope bucket: due scopes lose
// their expired members (deleted after a re-check inside the script), get
// their count keys rewritten, and are released once empty for
// Config.ReleaseAfter sweeps in a row.
func (e *Engine) SweepScopes(ctx context.Context) (SweepReport, error) {
	return SweepScopes{}.exec(ctx, e)
}

// ChangeLogAfter reads up to limit (1 to MaxPage) entries logged after the
// entry with ID after ("" reads from the oldest kept): the published changes
// and kicks, in the order they were logged. Gap reports that entries after
// after were already trimmed, so a reader missed some: it should reload the
// statuses it shows. It needs Config.ChangeLog.
func (e *Engine) ChangeLogAfter(ctx context.Context, after string, limit int) (entries []LoggedChange, gap bool, err error) {
	page, err := ReadChangeLog{after, limit}.exec(ctx, e)
	return page.Entries, page.Gap, err
}

// Ping checks that Redis is reachable and runs scripts, for readiness
// probes, and returns the server's clock.
func (e *Engine) Ping(ctx context.Context) (time.Time, error) {
	return Ping{}.exec(ctx, e)
}
