package conformance

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
)

// raceOp is one operation of a race history: a core.Op with its tokens
// filled in, the virtual instant it ran at, when it was called and
// returned (wall time since the round began), and its outcome.
type raceOp struct {
	id      int
	client  int
	adapter string
	// cached marks a compact count read through a client-side cache: it
	// may lag behind the server (see checkCachedCounts).
	cached    bool
	op        core.Op
	now       int64 // virtual ms
	call, ret int64 // wall ns since the round began
	// user narrows a user sweep of a partition to one user's changes
	user string

	// out is the outcome, of the type op's doc names; a single heartbeat's
	// is its []core.Ack of one, with its refusal in the Ack
	out any
	err error
}

// inputs returns a copy of o without its outcome, to run again.
func (o *raceOp) inputs() *raceOp {
	return &raceOp{id: o.id, client: o.client, adapter: o.adapter, cached: o.cached, op: o.op, now: o.now,
		call: o.call, ret: o.ret, user: o.user}
}

// exec runs o through p's door and records the outcome in o.
func (o *raceOp) exec(ctx context.Context, p core.Presence) {
	o.out, o.err = p.Do(ctx, o.op)
	if _, ok := o.op.(core.Heartbeat); ok {
		ack, _ := o.out.(core.Ack)
		if o.err != nil && ack.Err == nil {
			ack.Err = o.err
		}
		o.out, o.err = []core.Ack{ack}, nil
	}
}

// name names o's verb in reports.
func (o *raceOp) name() string {
	switch o.op.(type) {
	case core.Heartbeat, core.HeartbeatBatch:
		return "heartbeat"
	case core.Login:
		return "login"
	case core.Logout:
		return "logout"
	case core.Disconnect:
		return "disconnect"
	case core.SetManual:
		return "manual"
	case core.ReadStatus:
		return "status"
	case core.ReadStatuses:
		return "statuses"
	case core.TouchBatch:
		return "touch"
	case core.Leave:
		return "leave"
	case core.ReadCount:
		return "count"
	case core.ReadMembers:
		return "members"
	case core.ReadActive:
		return "active within"
	case core.SweepUsers:
		return "sweep users"
	case core.SweepScopes:
		return "sweep scopes"
	}
	return fmt.Sprintf("%T", o.op)
}

// beats are the heartbeats of a heartbeat or batch (none for other ops).
func (o *raceOp) beats() []core.Heartbeat {
	switch op := o.op.(type) {
	case core.Heartbeat:
		return []core.Heartbeat{op}
	case core.HeartbeatBatch:
		return op
	}
	return nil
}

// acks are a heartbeat's or batch's outcome.
func (o *raceOp) acks() []core.Ack { return as[[]core.Ack](o.out) }

// statuses are a status read's outcome, one for ReadStatus.
func (o *raceOp) statuses() []core.UserStatus {
	if st, ok := o.out.(core.UserStatus); ok {
		return []core.UserStatus{st}
	}
	return as[[]core.UserStatus](o.out)
}

// report is a sweep's outcome.
func (o *raceOp) report() core.SweepReport { return as[core.SweepReport](o.out) }

// isSweep reports whether o is a sweep, of users or scopes.
func (o *raceOp) isSweep() bool {
	switch o.op.(type) {
	case core.SweepUsers, core.SweepScopes:
		return true
	}
	return false
}

// held reports a sweep that found its bucket's lock held and did nothing
// (the race suite runs one bucket of each kind).
func (o *raceOp) held() bool { return o.report().Held > 0 }

// ends returns who a logout or disconnect ends, with the token it sent.
func (o *raceOp) ends() (user, dev, token string, ok bool) {
	switch op := o.op.(type) {
	case core.Logout:
		return op.User, op.Device, op.Token, true
	case core.Disconnect:
		return op.User, op.Device, op.Token, true
	}
	return "", "", "", false
}

// allChanges returns every change the operation published.
func (o *raceOp) allChanges() []core.Change {
	var out []core.Change
	for _, a := range o.acks() {
		out = append(out, a.Changes...)
	}
	switch v := o.out.(type) {
	case core.LoginResult:
		out = append(out, v.Changes...)
	case core.Ended:
		out = append(out, v.Changes...)
	case []core.Change:
		out = append(out, v...)
	case core.SweepReport:
		out = append(out, v.Changes...)
	}
	return out
}

// tokenBytes are the token bytes the engine drew for o, in the order a
// model running o draws them: a lock token for a sweep, the session token
// of a login, the seed of a batch's implicit logins.
func (o *raceOp) tokenBytes() []byte {
	switch op := o.op.(type) {
	case core.Login:
		if op.Token != "" {
			return nil // the caller chose the token
		}
		return tokenBytes(as[core.LoginResult](o.out).Token)
	case core.SweepUsers, core.SweepScopes:
		return make([]byte, 8)
	case core.Heartbeat, core.HeartbeatBatch:
		beats := o.beats()
		tokenless := false
		for _, b := range beats {
			tokenless = tokenless || b.Token == ""
		}
		if !tokenless {
			return nil
		}
		for i, a := range o.acks() {
			if a.Err == nil && beats[i].Token == "" {
				if seed, _, ok := strings.Cut(a.Token, "."); ok {
					return tokenBytes(seed)
				}
			}
		}
		return make([]byte, 8)
	}
	return nil
}

// tokenBytes are the 8 random bytes behind an engine-drawn token, which
// the engine writes in unpadded URL-safe base64 (zeros for a token that is
// not one).
func tokenBytes(s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 8 {
		return make([]byte, 8)
	}
	return b
}

// outcome renders o's outcome for comparison with a model's, relative to t0.
func (o *raceOp) outcome(x *runner) obs {
	var out obs
	if o.err != nil {
		out.text = errName(o.err)
		return out
	}
	switch op := o.op.(type) {
	case core.Heartbeat:
		out.text = x.outcome(&out, core.HeartbeatBatch{op}, o.out, nil)
	case core.ReadMembers:
		page := as[core.MemberPage](o.out)
		out.text = x.members(page) + " next=" + page.Next
	case core.SweepUsers:
		out.text = fmt.Sprintf("held=%t changes=%s", o.held(), x.changeList(&out, o.report().Changes))
	case core.SweepScopes:
		// Removed and Released are totals over every scope, which a
		// partition of one scope cannot predict: only the lock is compared.
		out.text = fmt.Sprintf("held=%t", o.held())
	case core.ReadStatus:
		out.text = x.outcome(&out, core.ReadStatuses{Users: []string{op.User}}, o.statuses(), nil)
	default:
		out.text = x.outcome(&out, o.op, o.out, nil)
	}
	return out
}

// describe renders o for a failure report.
func (o *raceOp) describe(x *runner) string {
	var in string
	switch op := o.op.(type) {
	case core.Heartbeat, core.HeartbeatBatch:
		beats := o.beats()
		parts := make([]string, len(beats))
		for i, b := range beats {
			parts[i] = fmt.Sprintf("%s/%s token=%q active=%t bg=%t", b.User, b.Device, b.Token, b.Active, b.Background)
		}
		in = strings.Join(parts, "; ")
	case core.Login:
		in = fmt.Sprintf("%s/%s %s gw=%s", op.User, op.Device, op.Kind, op.Gateway)
		if op.Token != "" {
			in += " retry token=" + op.Token
		}
		if op.Policy != nil {
			in += " policy=" + op.Policy.String()
		}
	case core.Logout, core.Disconnect:
		user, dev, token, _ := o.ends()
		in = fmt.Sprintf("%s/%s token=%q", user, dev, token)
	case core.SetManual:
		in = fmt.Sprintf("%s %s for %v", op.User, op.Manual, op.TTL)
	case core.ReadStatus:
		in = op.User
	case core.ReadStatuses:
		in = strings.Join(op.Users, ",")
	case core.TouchBatch:
		parts := make([]string, len(op))
		for i, t := range op {
			parts[i] = t.Scope.String() + " " + t.Member
		}
		in = strings.Join(parts, "; ")
	case core.Leave:
		in = op.Scope.String() + " " + op.Member
	case core.ReadCount:
		in = op.Scope.String()
	case core.ReadMembers:
		in = op.Scope.String()
	case core.ReadActive:
		in = op.Scope.String() + " " + op.Within.String()
	}
	via := o.adapter
	if o.cached {
		via += ", cached"
	}
	return fmt.Sprintf("#%d client %d (%s) at %s [wall %.3f–%.3f ms]: %s %s → %s", o.id, o.client, via,
		x.rel(time.UnixMilli(o.now)), float64(o.call)/1e6, float64(o.ret)/1e6, o.name(), in, render(o.outcome(x)))
}
