package conformance

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
)

// raceKind is the kind of a recorded operation of the race suite.
type raceKind uint8

const (
	rkBeat raceKind = iota
	rkLogin
	rkLogout
	rkDisconnect
	rkManual
	rkStatus
	rkStatuses
	rkTouch
	rkLeave
	rkCount
	rkMembers
	rkActive
	rkSweepUsers
	rkSweepScopes
)

var raceKindNames = [...]string{"heartbeat", "login", "logout", "disconnect", "manual", "status", "statuses",
	"touch", "leave", "count", "members", "active within", "sweep users", "sweep scopes"}

func (k raceKind) String() string { return raceKindNames[k] }

// raceOp is one operation of a race history: its inputs, the virtual
// instant it ran at, when it was called and returned (wall time since the
// round began), and its outcome.
type raceOp struct {
	id      int
	client  int
	adapter string
	// cached marks a compact count read through a client-side cache: it
	// may lag behind the server (see checkCachedCounts).
	cached    bool
	kind      raceKind
	now       int64 // virtual ms
	call, ret int64 // wall ns since the round began

	// inputs
	beats   []core.Heartbeat
	login   core.Login
	user    string
	dev     string
	token   string
	manual  core.Manual
	ttl     time.Duration
	users   []string
	touches []core.ScopeTouch
	sc      core.Scope
	member  string
	d       time.Duration

	// outcome
	err      error
	acks     []core.Ack
	res      core.LoginResult
	ended    core.Ended
	changes  []core.Change
	statuses []core.UserStatus
	count    core.Count
	page     core.MemberPage
	n        int64
	was      bool
	report   core.SweepReport
}

// inputs returns a copy of o without its outcome, to run again.
func (o *raceOp) inputs() *raceOp {
	return &raceOp{id: o.id, client: o.client, adapter: o.adapter, cached: o.cached, kind: o.kind, now: o.now, call: o.call, ret: o.ret,
		beats: o.beats, login: o.login, user: o.user, dev: o.dev, token: o.token, manual: o.manual, ttl: o.ttl,
		users: o.users, touches: o.touches, sc: o.sc, member: o.member, d: o.d}
}

// exec runs o on p and records the outcome in o.
func (o *raceOp) exec(ctx context.Context, p core.Presence) {
	switch o.kind {
	case rkBeat:
		if len(o.beats) == 1 {
			ack, err := p.Heartbeat(ctx, o.beats[0])
			if err != nil && ack.Err == nil {
				ack.Err = err
			}
			o.acks = []core.Ack{ack}
		} else {
			o.acks, o.err = p.HeartbeatBatch(ctx, o.beats)
		}
	case rkLogin:
		o.res, o.err = p.Login(ctx, o.login)
	case rkLogout:
		o.ended, o.err = p.Logout(ctx, o.user, o.dev, o.token)
	case rkDisconnect:
		o.ended, o.err = p.Disconnect(ctx, o.user, o.dev, o.token)
	case rkManual:
		o.changes, o.err = p.SetManual(ctx, o.user, o.manual, o.ttl)
	case rkStatus:
		var st core.UserStatus
		st, o.err = p.Status(ctx, o.user)
		o.statuses = []core.UserStatus{st}
	case rkStatuses:
		o.statuses, o.err = p.Statuses(ctx, o.users)
	case rkTouch:
		o.err = p.TouchBatch(ctx, o.touches)
	case rkLeave:
		o.was, o.err = p.Leave(ctx, o.sc, o.member)
	case rkCount:
		o.count, o.err = p.Count(ctx, o.sc)
	case rkMembers:
		o.page, o.err = p.Members(ctx, o.sc, "", core.MaxPage)
	case rkActive:
		o.n, o.err = p.ActiveWithin(ctx, o.sc, o.d)
	case rkSweepUsers:
		o.report, o.err = p.SweepUsers(ctx)
	case rkSweepScopes:
		o.report, o.err = p.SweepScopes(ctx)
	}
}

// held reports a sweep that found its bucket's lock held and did nothing
// (the race suite runs one bucket of each kind).
func (o *raceOp) held() bool { return o.report.Held > 0 }

// allChanges returns every change the operation published.
func (o *raceOp) allChanges() []core.Change {
	var out []core.Change
	for _, a := range o.acks {
		out = append(out, a.Changes...)
	}
	out = append(out, o.res.Changes...)
	out = append(out, o.ended.Changes...)
	out = append(out, o.changes...)
	out = append(out, o.report.Changes...)
	return out
}

// tokenBytes are the token bytes the engine drew for o, in the order a
// model running o draws them: a lock token for a sweep, the session token
// of a login, the seed of a batch's implicit logins.
func (o *raceOp) tokenBytes() []byte {
	switch o.kind {
	case rkLogin:
		if o.login.Token != "" {
			return nil // the caller chose the token
		}
		return tokenBytes(o.res.Token)
	case rkSweepUsers, rkSweepScopes:
		return make([]byte, 8)
	case rkBeat:
		tokenless := false
		for _, b := range o.beats {
			tokenless = tokenless || b.Token == ""
		}
		if !tokenless {
			return nil
		}
		for i, a := range o.acks {
			if a.Err == nil && o.beats[i].Token == "" {
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
	switch o.kind {
	case rkBeat:
		parts := make([]string, len(o.acks))
		for i, a := range o.acks {
			if a.Err != nil {
				parts[i] = errName(a.Err)
				continue
			}
			parts[i] = "ok token=" + a.Token + " " + x.changeList(&out, a.Changes)
		}
		out.text = strings.Join(parts, "; ")
	case rkLogin:
		kicks := make([]string, len(o.res.Kicked))
		for i, k := range o.res.Kicked {
			kicks[i] = x.kick(k)
		}
		sort.Strings(kicks)
		out.text = "ok token=" + o.res.Token + " kicked=[" + strings.Join(kicks, " ") + "] " + x.changeList(&out, o.res.Changes)
	case rkLogout, rkDisconnect:
		out.text = "removed=" + strconv.FormatBool(o.ended.Removed) + " " + x.changeList(&out, o.ended.Changes)
	case rkManual:
		out.text = "ok " + x.changeList(&out, o.changes)
	case rkStatus, rkStatuses:
		parts := make([]string, len(o.statuses))
		for i, st := range o.statuses {
			parts[i] = x.status(st)
		}
		out.text = strings.Join(parts, "; ")
	case rkTouch:
		out.text = "ok"
	case rkLeave:
		out.text = "was there=" + strconv.FormatBool(o.was)
	case rkCount:
		out.text = fmt.Sprintf("n=%s asOf=%s stale=%t", number(&out, o.sc, o.count.N), x.rel(o.count.AsOf), o.count.Stale)
	case rkMembers:
		ids := make([]string, len(o.page.Members))
		for i, m := range o.page.Members {
			ids[i] = m.ID + "@" + x.rel(m.LastSeen)
		}
		out.text = strings.Join(ids, " ") + " next=" + o.page.Next
	case rkActive:
		out.text = "n=" + number(&out, o.sc, o.n)
	case rkSweepUsers:
		out.text = fmt.Sprintf("held=%t changes=%s", o.held(), x.changeList(&out, o.report.Changes))
	case rkSweepScopes:
		// Removed and Released are totals over every scope, which a
		// partition of one scope cannot predict: only the lock is compared.
		out.text = fmt.Sprintf("held=%t", o.held())
	}
	return out
}

// describe renders o for a failure report.
func (o *raceOp) describe(x *runner) string {
	var in string
	switch o.kind {
	case rkBeat:
		parts := make([]string, len(o.beats))
		for i, b := range o.beats {
			parts[i] = fmt.Sprintf("%s/%s token=%q active=%t bg=%t", b.User, b.Device, b.Token, b.Active, b.Background)
		}
		in = strings.Join(parts, "; ")
	case rkLogin:
		in = fmt.Sprintf("%s/%s %s gw=%s", o.login.User, o.login.Device, o.login.Kind, o.login.Gateway)
		if o.login.Token != "" {
			in += " retry token=" + o.login.Token
		}
		if o.login.Policy != nil {
			in += " policy=" + o.login.Policy.String()
		}
	case rkLogout, rkDisconnect:
		in = fmt.Sprintf("%s/%s token=%q", o.user, o.dev, o.token)
	case rkManual:
		in = fmt.Sprintf("%s %s for %v", o.user, o.manual, o.ttl)
	case rkStatus:
		in = o.user
	case rkStatuses:
		in = strings.Join(o.users, ",")
	case rkTouch:
		parts := make([]string, len(o.touches))
		for i, t := range o.touches {
			parts[i] = t.Scope.String() + " " + t.Member
		}
		in = strings.Join(parts, "; ")
	case rkLeave:
		in = o.sc.String() + " " + o.member
	case rkCount, rkMembers:
		in = o.sc.String()
	case rkActive:
		in = o.sc.String() + " " + o.d.String()
	}
	via := o.adapter
	if o.cached {
		via += ", cached"
	}
	return fmt.Sprintf("#%d client %d (%s) at %s [wall %.3f–%.3f ms]: %s %s → %s", o.id, o.client, o.adapter,
		x.rel(time.UnixMilli(o.now)), float64(o.call)/1e6, float64(o.ret)/1e6, o.kind, in, render(o.outcome(x)))
}
