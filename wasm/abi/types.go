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

// Heartbeat is core.Heartbeat on the wire. Meta is null to keep the
// device's metadata, an object (possibly empty) to replace it. At is
// absent when the client gave no timestamp.
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

// FromHeartbeat returns the wire form of hb.
func FromHeartbeat(hb core.Heartbeat) Heartbeat {
	w := Heartbeat{User: hb.User, Device: hb.Device, Kind: Kind(hb.Kind), Gateway: hb.Gateway, Token: hb.Token,
		Active: hb.Active, Background: hb.Background, Meta: hb.Meta}
	if !hb.At.IsZero() {
		at := hb.At.UnixMilli()
		w.At = &at
	}
	return w
}

// Core returns the heartbeat w stands for.
func (w Heartbeat) Core() core.Heartbeat {
	hb := core.Heartbeat{User: w.User, Device: w.Device, Kind: core.Kind(w.Kind), Gateway: w.Gateway, Token: w.Token,
		Active: w.Active, Background: w.Background, Meta: w.Meta}
	if w.At != nil {
		hb.At = time.UnixMilli(*w.At)
	}
	return hb
}

// Ack is core.Ack on the wire.
type Ack struct {
	Token   string   `json:"token"`
	Error   *Error   `json:"error,omitempty"`
	Changes []Change `json:"changes"`
}

// FromAck returns the wire form of a.
func FromAck(a core.Ack) Ack {
	return Ack{Token: a.Token, Error: EncodeError(a.Err), Changes: fromChanges(a.Changes)}
}

// Core returns the ack w stands for.
func (w Ack) Core() core.Ack {
	return core.Ack{Token: w.Token, Err: w.Error.Err(), Changes: coreChanges(w.Changes)}
}

// Change is core.Change on the wire.
type Change struct {
	User string `json:"user"`
	From Status `json:"from"`
	To   Status `json:"to"`
	At   int64  `json:"at"`
}

func fromChanges(cs []core.Change) []Change {
	if cs == nil {
		return nil
	}
	out := make([]Change, len(cs))
	for i, c := range cs {
		out[i] = Change{User: c.User, From: Status(c.From), To: Status(c.To), At: Millis(c.At)}
	}
	return out
}

func coreChanges(ws []Change) []core.Change {
	if ws == nil {
		return nil
	}
	out := make([]core.Change, len(ws))
	for i, w := range ws {
		out[i] = core.Change{User: w.User, From: core.Status(w.From), To: core.Status(w.To), At: Time(w.At)}
	}
	return out
}

// Login is core.Login on the wire; Policy is absent to use the engine's,
// Token absent to have the engine issue one.
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

// FromLogin returns the wire form of l.
func FromLogin(l core.Login) Login {
	w := Login{User: l.User, Device: l.Device, Kind: Kind(l.Kind), Gateway: l.Gateway, Background: l.Background, Meta: l.Meta, Token: l.Token}
	if l.Policy != nil {
		p := Policy(*l.Policy)
		w.Policy = &p
	}
	return w
}

// Core returns the login w stands for.
func (w Login) Core() core.Login {
	l := core.Login{User: w.User, Device: w.Device, Kind: core.Kind(w.Kind), Gateway: w.Gateway, Background: w.Background, Meta: w.Meta, Token: w.Token}
	if w.Policy != nil {
		p := core.Policy(*w.Policy)
		l.Policy = &p
	}
	return l
}

// LoginResult is core.LoginResult on the wire.
type LoginResult struct {
	Token   string   `json:"token"`
	Kicked  []Kick   `json:"kicked"`
	Changes []Change `json:"changes"`
}

// Kick is core.Kick on the wire.
type Kick struct {
	User    string `json:"user"`
	Device  string `json:"device"`
	Kind    Kind   `json:"kind"`
	Gateway string `json:"gateway"`
	At      int64  `json:"at"`
}

// FromLoginResult returns the wire form of r.
func FromLoginResult(r core.LoginResult) LoginResult {
	w := LoginResult{Token: r.Token, Changes: fromChanges(r.Changes)}
	if r.Kicked != nil {
		w.Kicked = make([]Kick, len(r.Kicked))
		for i, k := range r.Kicked {
			w.Kicked[i] = Kick{User: k.User, Device: k.Device, Kind: Kind(k.Kind), Gateway: k.Gateway, At: Millis(k.At)}
		}
	}
	return w
}

// Core returns the login result w stands for.
func (w LoginResult) Core() core.LoginResult {
	r := core.LoginResult{Token: w.Token, Changes: coreChanges(w.Changes)}
	if w.Kicked != nil {
		r.Kicked = make([]core.Kick, len(w.Kicked))
		for i, k := range w.Kicked {
			r.Kicked[i] = core.Kick{User: k.User, Device: k.Device, Kind: core.Kind(k.Kind), Gateway: k.Gateway, At: Time(k.At)}
		}
	}
	return r
}

// End is the argument of logout and disconnect.
type End struct {
	User   string `json:"user"`
	Device string `json:"device"`
	Token  string `json:"token,omitempty"`
}

// Ended is core.Ended on the wire.
type Ended struct {
	Removed bool     `json:"removed"`
	Changes []Change `json:"changes"`
}

// FromEnded returns the wire form of e.
func FromEnded(e core.Ended) Ended { return Ended{Removed: e.Removed, Changes: fromChanges(e.Changes)} }

// Core returns the outcome w stands for.
func (w Ended) Core() core.Ended {
	return core.Ended{Removed: w.Removed, Changes: coreChanges(w.Changes)}
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
func FromChanges(cs []core.Change) Changes { return Changes{Changes: fromChanges(cs)} }

// Core returns the changes w stands for.
func (w Changes) Core() []core.Change { return coreChanges(w.Changes) }

// StatusArgs is the argument of status.
type StatusArgs struct {
	User string `json:"user"`
}

// StatusesArgs is the argument of statuses.
type StatusesArgs struct {
	Users []string `json:"users"`
}

// UserStatus is core.UserStatus on the wire.
type UserStatus struct {
	User        string   `json:"user"`
	Status      Status   `json:"status"`
	Manual      Manual   `json:"manual"`
	ManualUntil int64    `json:"manual_until,omitempty"`
	Devices     []Device `json:"devices"`
	At          int64    `json:"at"`
}

// Device is core.Device on the wire.
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

// FromUserStatus returns the wire form of s.
func FromUserStatus(s core.UserStatus) UserStatus {
	w := UserStatus{User: s.User, Status: Status(s.Status), Manual: Manual(s.Manual), ManualUntil: Millis(s.ManualUntil), At: Millis(s.At)}
	if s.Devices != nil {
		w.Devices = make([]Device, len(s.Devices))
		for i, d := range s.Devices {
			w.Devices[i] = Device{ID: d.ID, Kind: Kind(d.Kind), Gateway: d.Gateway, State: Status(d.State), Background: d.Background,
				LoginAt: Millis(d.LoginAt), LastSeen: Millis(d.LastSeen), LastActive: Millis(d.LastActive), Meta: d.Meta}
		}
	}
	return w
}

// Core returns the status w stands for.
func (w UserStatus) Core() core.UserStatus {
	s := core.UserStatus{User: w.User, Status: core.Status(w.Status), Manual: core.Manual(w.Manual), ManualUntil: Time(w.ManualUntil), At: Time(w.At)}
	if w.Devices != nil {
		s.Devices = make([]core.Device, len(w.Devices))
		for i, d := range w.Devices {
			s.Devices[i] = core.Device{ID: d.ID, Kind: core.Kind(d.Kind), Gateway: d.Gateway, State: core.Status(d.State), Background: d.Background,
				LoginAt: Time(d.LoginAt), LastSeen: Time(d.LastSeen), LastActive: Time(d.LastActive), Meta: d.Meta}
		}
	}
	return s
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
type Count struct {
	N     int64 `json:"n"`
	AsOf  int64 `json:"as_of"`
	Stale bool  `json:"stale,omitempty"`
}

// FromCount returns the wire form of c.
func FromCount(c core.Count) Count { return Count{N: c.N, AsOf: Millis(c.AsOf), Stale: c.Stale} }

// Core returns the count w stands for.
func (w Count) Core() core.Count { return core.Count{N: w.N, AsOf: Time(w.AsOf), Stale: w.Stale} }

// MemberPage is core.MemberPage on the wire.
type MemberPage struct {
	Members []Member `json:"members"`
	Next    string   `json:"next,omitempty"`
}

// Member is core.Member on the wire.
type Member struct {
	ID       string `json:"id"`
	LastSeen int64  `json:"last_seen"`
}

// FromMemberPage returns the wire form of p.
func FromMemberPage(p core.MemberPage) MemberPage {
	w := MemberPage{Next: p.Next}
	if p.Members != nil {
		w.Members = make([]Member, len(p.Members))
		for i, m := range p.Members {
			w.Members[i] = Member{ID: m.ID, LastSeen: Millis(m.LastSeen)}
		}
	}
	return w
}

// Core returns the page w stands for.
func (w MemberPage) Core() core.MemberPage {
	p := core.MemberPage{Next: w.Next}
	if w.Members != nil {
		p.Members = make([]core.Member, len(w.Members))
		for i, m := range w.Members {
			p.Members[i] = core.Member{ID: m.ID, LastSeen: Time(m.LastSeen)}
		}
	}
	return p
}

// SweepReport is core.SweepReport on the wire.
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

// FromSweepReport returns the wire form of r.
func FromSweepReport(r core.SweepReport) SweepReport {
	return SweepReport{Buckets: r.Buckets, Held: r.Held, Visited: r.Visited, Removed: r.Removed, Released: r.Released,
		Changes: fromChanges(r.Changes), Steps: r.Steps, Duration: Duration(r.Duration)}
}

// Core returns the report w stands for (without the core's private
// bookkeeping of the pass's first and last instants).
func (w SweepReport) Core() core.SweepReport {
	return core.SweepReport{Buckets: w.Buckets, Held: w.Held, Visited: w.Visited, Removed: w.Removed, Released: w.Released,
		Changes: coreChanges(w.Changes), Steps: w.Steps, Duration: time.Duration(w.Duration)}
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

// LoggedChange is core.LoggedChange on the wire: a change, or a kick
// (Kick set; Change then holds the zero change).
type LoggedChange struct {
	ID     string `json:"id"`
	Change Change `json:"change"`
	Kick   *Kick  `json:"kick,omitempty"`
}

// FromChangeLog returns the wire form of a change log page.
func FromChangeLog(entries []core.LoggedChange, gap bool) ChangeLog {
	w := ChangeLog{Gap: gap}
	if entries != nil {
		w.Entries = make([]LoggedChange, len(entries))
		for i, e := range entries {
			w.Entries[i] = LoggedChange{ID: e.ID, Change: fromChanges([]core.Change{e.Change})[0]}
			if e.Kick != nil {
				k := e.Kick
				w.Entries[i].Kick = &Kick{User: k.User, Device: k.Device, Kind: Kind(k.Kind), Gateway: k.Gateway, At: Millis(k.At)}
			}
		}
	}
	return w
}

// Core returns the page w stands for.
func (w ChangeLog) Core() ([]core.LoggedChange, bool) {
	var out []core.LoggedChange
	if w.Entries != nil {
		out = make([]core.LoggedChange, len(w.Entries))
		for i, e := range w.Entries {
			out[i] = core.LoggedChange{ID: e.ID, Change: coreChanges([]Change{e.Change})[0]}
			if k := e.Kick; k != nil {
				out[i].Kick = &core.Kick{User: k.User, Device: k.Device, Kind: core.Kind(k.Kind), Gateway: k.Gateway, At: Time(k.At)}
			}
		}
	}
	return out, w.Gap
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
