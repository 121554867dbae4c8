package core

import (
	"context"
	"time"
)

// Presence is the one door that the Redis-backed Engine, the in-memory
// Model and the WebAssembly host's engine share, so that any of them can
// stand in for another: Do takes any Op and returns the outcome its type
// names, with the same errors.
type Presence interface {
	Do(ctx context.Context, op Op) (any, error)
}

// Heartbeat is one heartbeat of a device. Any application message may serve
// as one.
type Heartbeat struct {
	User   string
	Device string
	// Kind selects the heartbeat interval of a new session; a session keeps
	// the kind it logged in with.
	Kind Kind
	// Gateway is the node holding the device's connection; kicks are
	// addressed to it. Optional: empty keeps the session's gateway.
	Gateway string
	// Token is the session token from Login. Required under the exclusive
	// policies; under PolicyMulti it may be empty (an implicit login), and
	// when given it fences the session: a superseded token is refused.
	Token string
	// Active marks a heartbeat that reflects a user action; it refreshes
	// last-active (keeping a device ONLINE rather than AWAY).
	Active bool
	// Background marks an app suspended by the OS and reachable by push.
	Background bool
	// Meta replaces the device's metadata when non-nil.
	Meta map[string]string
	// At is when the client says the activity happened. Optional; it must be
	// within Config.MaxSkew of the engine's clock.
	At time.Time
}

// Ack is the outcome of one heartbeat.
type Ack struct {
	// Token is the session token in force: the one the heartbeat carried,
	// or the one issued by an implicit login.
	Token string
	// Err is the refusal of this heartbeat within a batch (ErrSessionReplaced,
	// ErrNoSession, ErrTooManyDevices, ErrClockSkew, or an *InputError).
	Err error
	// Changes are the status changes this heartbeat published.
	Changes []Change
	// Reassert says that Redis lost its data (docs/design.md §11) and that
	// this heartbeat found nothing of its user, not even a manual status:
	// a caller that set one (SetManual) sets it again, with what is left
	// of its expiry. The heartbeat brought the device back; while the
	// loss heals, neither publishes a change.
	Reassert bool
}

// Login logs a device in.
type Login struct {
	User       string
	Device     string
	Kind       Kind
	Gateway    string
	Background bool
	Meta       map[string]string
	// Policy overrides Config.Policy for this login when non-nil.
	Policy *Policy
	// Token, when set, is the session token to issue instead of a new one.
	// A caller that retries a login whose reply was lost passes the same
	// token: the retry then changes nothing (and kicks nobody again).
	Token string
}

// LoginResult is the outcome of a login.
type LoginResult struct {
	// Token is the new session token; heartbeats should carry it.
	Token string
	// Kicked are the sessions the login removed, with their gateways.
	Kicked  []Kick
	Changes []Change
}

// Ended is the outcome of a logout or disconnect.
type Ended struct {
	// Removed reports whether the device had a live session.
	Removed bool
	Changes []Change
}

// Change is a published change of a user's status, as others see it.
type Change struct {
	User string
	From Status
	To   Status
	At   time.Time
}

// Loss is a loss of Redis's data that an engine found (docs/design.md
// §11): a restart without persistence, a failover to an empty replica, a
// FLUSHALL. Until Until, devices come back with their next heartbeat and
// their callers set their manual statuses again, and no change is
// published, so that nobody hears of "changes" that are only the state
// coming back; a reader that keeps statuses reads them again at Until.
// Each user bucket that lost its data reports one; a Feed hands a reader
// one per healing.
type Loss struct {
	At    time.Time // when the engine found it
	Until time.Time // when the healing ends
}

// Kick is a session removed by a login, addressed to its gateway.
type Kick struct {
	User    string
	Device  string
	Kind    Kind
	Gateway string
	At      time.Time
}

// UserStatus is one user's status at an instant.
type UserStatus struct {
	User string
	// Status is what others see: the aggregate of docs/design.md §6.
	Status Status
	// Manual is the manual status in force, and ManualUntil its expiry (zero: none).
	Manual      Manual
	ManualUntil time.Time
	// Devices are the live devices, by ID.
	Devices []Device
	At      time.Time
}

// Device is one live device session.
type Device struct {
	ID         string
	Kind       Kind
	Gateway    string
	State      Status
	Background bool
	LoginAt    time.Time
	LastSeen   time.Time
	LastActive time.Time
	Meta       map[string]string
}

// ScopeTouch is one member's activity in a scope.
type ScopeTouch struct {
	Scope  Scope
	Member string
}

// Count is a scope's member count.
type Count struct {
	N int64
	// AsOf is when the count was taken (for compact scopes, the last sweep).
	AsOf time.Time
	// Stale is set when Redis could not be reached and this is the last
	// good count the engine saw.
	Stale bool
}

// Member is one member of a scope and its last touch.
type Member struct {
	ID       string
	LastSeen time.Time
}

// MemberPage is one page of a scope's members. Next is the cursor of the
// next page, or "" after the last.
type MemberPage struct {
	Members []Member
	Next    string
}

// SweepReport says what one sweep pass did.
type SweepReport struct {
	Buckets  int // buckets visited
	Held     int // buckets skipped: another sweeper held their lock
	Visited  int // users or scopes settled
	Removed  int // scope members removed (user sweeps count users settled)
	Released int // empty scopes released
	Changes  []Change
	Steps    int           // script calls
	Duration time.Duration // server time from the first to the last step

	first, last time.Time
}
