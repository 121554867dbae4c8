package abi

import (
	"strconv"
	"time"

	"github.com/presencekit/presence/core"
)

// Instants travel as int64 milliseconds since the Unix epoch, 0 standing
// for the zero time.Time (the core's own convention).

// Millis returns t in milliseconds since the epoch, 0 for the zero time.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Time returns the instant of ms milliseconds since the epoch, the zero
// time.Time for 0.
func Time(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// convert maps a slice with f, keeping nil apart from empty.
func convert[E, T any](s []E, f func(E) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, e := range s {
		out[i] = f(e)
	}
	return out
}

// Heartbeat is core.Heartbeat on the wire. Meta is null to keep the
// device's metadata, an object (possibly empty) to replace it. At is
// absent when the client gave no timestamp.
//
//abi:core
type Heartbeat struct {
	User       string            `json:"user"`
	Device     string            `json:"device"`
	Kind       Kind              `json:"kind"`
	Gateway    string            `json:"gateway,omitempty"`
	Token      string            `json:"token,omitempty"`
	Active     bool              `json:"active,omitempty"`
	Background bool              `json:"background,omitempty"`
	Meta       map[string]string `json:"meta"`
	At         *int64            `json:"at,omitempty"`
}

// Ack is core.Ack on the wire.
//
//abi:core
type Ack struct {
	Token    string   `json:"token"`
	Error    *Error   `json:"error,omitempty" core:"Err"`
	Changes  []Change `json:"changes"`
	Reassert bool     `json:"reassert,omitempty"`
}

// Change is core.Change on the wire.
//
//abi:core
type Change struct {
	User string `json:"user"`
	From Status `json:"from"`
	To   Status `json:"to"`
	At   int64  `json:"at"`
}

// Login is core.Login on the wire; Policy is absent to use the engine's,
// Token absent to have the engine issue one.
//
//abi:core
type Login struct {
	User       string            `json:"user"`
	Device     string            `json:"device"`
	Kind       Kind              `json:"kind"`
	Gateway    string            `json:"gateway,omitempty"`
	Background bool              `json:"background,omitempty"`
	Meta       map[string]string `json:"meta"`
	Policy     *Policy           `json:"policy,omitempty"`
	Token      string            `json:"token,omitempty"`
}

// LoginResult is core.LoginResult on the wire.
//
//abi:core
type LoginResult struct {
	Token   string   `json:"token"`
	Kicked  []Kick   `json:"kicked"`
	Changes []Change `json:"changes"`
}

// Kick is core.Kick on the wire.
//
//abi:core
type Kick struct {
	User    string `json:"user"`
	Device  string `json:"device"`
	Kind    Kind   `json:"kind"`
	Gateway string `json:"gateway"`
	At      int64  `json:"at"`
}

// Loss is core.Loss on the wire.
//
//abi:core
type Loss struct {
	At    int64 `json:"at"`
	Until int64 `json:"until"`
}

// End is the argument of logout and disconnect.
type End struct {
	User   string `json:"user"`
	Device string `json:"device"`
	Token  string `json:"token,omitempty"`
}

// Ended is core.Ended on the wire.
//
//abi:core
type Ended struct {
	Removed bool     `json:"removed"`
	Changes []Change `json:"changes"`
}

// SetManual is the argument of set_manual; TTL 0 means until cleared.
type SetManual struct {
	User   string   `json:"user"`
	Manual Manual   `json:"manual"`
	TTL    Duration `json:"ttl_ms,omitempty"`
}

// Changes is the result of set_manual: the changes it published.
type Changes struct {
	Changes []Change `json:"changes"`
}

// FromChanges returns the wire form of cs.
func FromChanges(cs []core.Change) Changes { return Changes{Changes: convert(cs, FromChange)} }

// Core returns the changes w stands for.
func (w Changes) Core() []core.Change { return convert(w.Changes, Change.Core) }

// StatusArgs is the argument of status.
type StatusArgs struct {
	User string `json:"user"`
}

// StatusesArgs is the argument of statuses.
type StatusesArgs struct {
	Users []string `json:"users"`
}

// UserStatus is core.UserStatus on the wire.
//
//abi:core
type UserStatus struct {
	User        string   `json:"user"`
	Status      Status   `json:"status"`
	Manual      Manual   `json:"manual"`
	ManualUntil int64    `json:"manual_until,omitempty"`
	Devices     []Device `json:"devices"`
	At          int64    `json:"at"`
}

// Device is core.Device on the wire.
//
//abi:core
type Device struct {
	ID         string            `json:"id"`
	Kind       Kind              `json:"kind"`
	Gateway    string            `json:"gateway,omitempty"`
	State      Status            `json:"state"`
	Background bool              `json:"background,omitempty"`
	LoginAt    int64             `json:"login_at"`
	LastSeen   int64             `json:"last_seen"`
	LastActive int64             `json:"last_active"`
	Meta       map[string]string `json:"meta"`
}

// Statuses is the result of statuses.
type Statuses struct {
	Statuses []UserStatus `json:"statuses"`
}

// Scope is core.Scope on the wire.
type Scope struct {
	Class string `json:"class"`
	ID    string `json:"id"`
}

// Touch is core.ScopeTouch on the wire, and the argument of touch and leave.
type Touch struct {
	Scope  Scope  `json:"scope"`
	Member string `json:"member"`
}

// TouchBatch is the argument of touch_batch.
type TouchBatch struct {
	Touches []Touch `json:"touches"`
}

// HeartbeatBatch is the argument of heartbeat_batch.
type HeartbeatBatch struct {
	Beats []Heartbeat `json:"beats"`
}

// Acks is the result of heartbeat_batch.
type Acks struct {
	Acks []Ack `json:"acks"`
}

// ScopeArgs is the argument of count.
type ScopeArgs struct {
	Scope Scope `json:"scope"`
}

// MembersArgs is the argument of members.
type MembersArgs struct {
	Scope  Scope  `json:"scope"`
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit"`
}

// ActiveWithinArgs is the argument of active_within.
type ActiveWithinArgs struct {
	Scope  Scope    `json:"scope"`
	Within Duration `json:"within_ms"`
}

// Empty is the argument of the sweeps and the result of the touches.
type Empty struct{}

// Removed is the result of leave.
type Removed struct {
	Removed bool `json:"removed"`
}

// N is the result of active_within.
type N struct {
	N int64 `json:"n"`
}

// Count is core.Count on the wire.
//
//abi:core
type Count struct {
	N     int64 `json:"n"`
	AsOf  int64 `json:"as_of"`
	Stale bool  `json:"stale,omitempty"`
}

// MemberPage is core.MemberPage on the wire.
//
//abi:core
type MemberPage struct {
	Members []Member `json:"members"`
	Next    string   `json:"next,omitempty"`
}

// Member is core.Member on the wire.
//
//abi:core
type Member struct {
	ID       string `json:"id"`
	LastSeen int64  `json:"last_seen"`
}

// SweepReport is core.SweepReport on the wire, without the core's private
// bookkeeping of the pass's first and last instants.
//
//abi:core
type SweepReport struct {
	Buckets  int      `json:"buckets"`
	Held     int      `json:"held"`
	Visited  int      `json:"visited"`
	Removed  int      `json:"removed"`
	Released int      `json:"released"`
	Changes  []Change `json:"changes"`
	Steps    int      `json:"steps"`
	Duration Duration `json:"duration_ms"`
}

// Configured is the result of configure.
type Configured struct {
	// ABI is the module's ABI version.
	ABI int `json:"abi"`
	// Clock is "host" or "server", as configured.
	Clock string `json:"clock"`
}

// ChangeLogArgs is the argument of change_log_after.
type ChangeLogArgs struct {
	After string `json:"after,omitempty"`
	Limit int    `json:"limit"`
}

// ChangeLog is the result of change_log_after (core.Engine.ChangeLogAfter).
type ChangeLog struct {
	Entries []LoggedChange `json:"entries"`
	Gap     bool           `json:"gap,omitempty"`
}

// LoggedChange is core.LoggedChange on the wire: a change, a kick (Kick
// set) or a data loss (Loss set); Change holds the zero change for the
// last two.
//
//abi:core
type LoggedChange struct {
	ID      string `json:"id"`
	Change  Change `json:"change"`
	Kick    *Kick  `json:"kick,omitempty"`
	Loss    *Loss  `json:"loss,omitempty"`
	EventID string `json:"event_id,omitempty"`
}

// FromChangeLog returns the wire form of a change log page.
func FromChangeLog(entries []core.LoggedChange, gap bool) ChangeLog {
	return ChangeLog{Entries: convert(entries, FromLoggedChange), Gap: gap}
}

// Core returns the page w stands for.
func (w ChangeLog) Core() ([]core.LoggedChange, bool) {
	return convert(w.Entries, LoggedChange.Core), w.Gap
}

// Online is the result of online (core.Engine.Online): users per
// published status, by status name.
type Online struct {
	Online map[string]int64 `json:"online"`
}

// FromOnline returns the wire form of counts.
func FromOnline(counts map[core.Status]int64) Online {
	w := Online{Online: make(map[string]int64, len(counts))}
	for s, n := range counts {
		w.Online[statusKey(s)] = n
	}
	return w
}

// Core returns the counts w stands for; it fails with a *DecodeError for
// a key that is not a status.
func (w Online) Core() (map[core.Status]int64, error) {
	out := make(map[core.Status]int64, len(w.Online))
	for k, n := range w.Online {
		var s Status
		if err := Unmarshal(quoteOrNumber(k), &s); err != nil {
			return nil, &DecodeError{What: "response", Field: "result.online", Reason: "unknown status " + truncate(k)}
		}
		out[core.Status(s)] = n
	}
	return out, nil
}

func statusKey(s core.Status) string {
	if n := statusName(Status(s)); n != "" {
		return n
	}
	return strconv.Itoa(int(s))
}

// Resume is the argument of resume: the results of the calls plan Plan
// waits for, one per call and in order.
type Resume struct {
	Plan    int64   `json:"plan"`
	Results Results `json:"results"`
}

// PlanRef is the argument of cancel.
type PlanRef struct {
	Plan int64 `json:"plan"`
}

// Message is a message an ended plan asks the host to publish
// (core.Publication): a status change (Kind "change") or a kick ("kick"),
// whose Payload is the JSON a native engine publishes on Channel
// (docs/design.md §7).
//
// ID is the event's outbox ID (also in Payload): once the message is out,
// the host acknowledges it with an "ack" request, or a sweep delivers it
// again.
type Message struct {
	Kind    string `json:"kind"`
	Channel string `json:"channel"`
	Payload string `json:"payload"`
	ID      string `json:"id,omitempty"`
}

// AckArgs is the argument of ack: the outbox IDs of messages delivered.
type AckArgs struct {
	IDs []string `json:"ids"`
}

// FromPublications returns the wire form of pubs (nil for none).
func FromPublications(pubs []core.Publication) []Message {
	if len(pubs) == 0 {
		return nil
	}
	out := make([]Message, len(pubs))
	for i, p := range pubs {
		out[i] = Message{Kind: p.Kind, Channel: p.Channel, Payload: string(p.Payload), ID: p.ID}
	}
	return out
}
