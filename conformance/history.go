package conformance

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
)

// Properties of a race history, checked before linearizability because
// their failures read better.
const (
	propOutcomes      = "every operation succeeds or is refused by the rules"
	propNoEarlyRemove = "no member or device removed while inside its window"
	propNoStaleCount  = "nothing expired counted after a sweep that began after its expiry"
	propOneEvent      = "one event per net change"
	propKickedToken   = "no kicked token ever accepted again"
	propLinearizable  = "linearizable against the model"
)

// check runs every property on the round's history.
func (r *round) check() *failure {
	for _, c := range []func() *failure{r.checkOutcomes, r.checkDevicesKept, r.checkMembersKept,
		r.checkStaleCounts, r.checkEvents, r.checkKickedTokens, r.checkLinearizable} {
		if f := c(); f != nil {
			f.text = fmt.Sprintf("round %d (policy %s, key prefix %s):\n%s", r.n, r.cfg.Policy, r.cfg.Prefix, f.text)
			return f
		}
	}
	return nil
}

func (r *round) fail(property string, ops []*raceOp, format string, args ...any) *failure {
	var b strings.Builder
	fmt.Fprintf(&b, format, args...)
	b.WriteString("\noperations involved:\n")
	sort.Slice(ops, func(i, j int) bool { return ops[i].call < ops[j].call })
	seen := map[int]bool{}
	for _, o := range ops {
		if o != nil && !seen[o.id] {
			seen[o.id] = true
			b.WriteString("  " + o.describe(r.x) + "\n")
		}
	}
	return &failure{property: property, text: b.String()}
}

func expected(err error) bool {
	return err == nil || errors.Is(err, core.ErrSessionReplaced) || errors.Is(err, core.ErrNoSession) ||
		errors.Is(err, core.ErrTooManyDevices) || errors.Is(err, core.ErrUnsupported)
}

func (r *round) checkOutcomes() *failure {
	for _, o := range r.hist {
		if !expected(o.err) {
			return r.fail(propOutcomes, []*raceOp{o}, "%s failed: %v", o.name(), o.err)
		}
		for _, a := range o.acks() {
			if !expected(a.Err) {
				return r.fail(propOutcomes, []*raceOp{o}, "heartbeat failed: %v", a.Err)
			}
		}
	}
	return nil
}

// before reports whether a returned before b was called: real-time order.
func before(a, b *raceOp) bool { return a.ret < b.call }

// overlapsSpan reports whether o may have taken effect between the call of
// from and the return of to.
func overlapsSpan(o, from, to *raceOp) bool { return o.ret >= from.call && o.call <= to.ret }

// sessionOps are the accepted operations that refresh a device's last
// heartbeat: heartbeats and logins of it. A login that carries its token
// (a driver's retry) does not count: when a live session of the device
// already holds that token, as an earlier heartbeat with the same token
// may have made it, the login is a repeat and changes nothing.
func (r *round) sessionOps(user, dev string) []*raceOp {
	var out []*raceOp
	for _, o := range r.hist {
		if l, ok := o.op.(core.Login); ok {
			if o.err == nil && l.User == user && l.Device == dev && l.Token == "" {
				out = append(out, o)
			}
			continue
		}
		for i, b := range o.beats() {
			if o.err == nil && o.acks()[i].Err == nil && b.User == user && b.Device == dev {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

// enders are the operations that may end a device's session: logouts and
// disconnects of it, and logins of the user's other devices (kicks).
func (r *round) enders(user, dev string) []*raceOp {
	var out []*raceOp
	for _, o := range r.hist {
		if u, d, _, ok := o.ends(); ok && u == user && d == dev {
			out = append(out, o)
		}
		if l, ok := o.op.(core.Login); ok && l.User == user && l.Device != dev {
			out = append(out, o)
		}
	}
	return out
}

// beatOf returns the heartbeat of user/dev in o, if o is a heartbeat.
func beatOf(o *raceOp, user, dev string) (core.Heartbeat, bool) {
	for _, b := range o.beats() {
		if b.User == user && b.Device == dev {
			return b, true
		}
	}
	return core.Heartbeat{}, false
}

// checkDevicesKept: a status read must list every device that heartbeat
// (or logged in) before the read began, within its window of the read's
// instant, unless something that may end its session ran meanwhile.
// Heartbeats that ran concurrently with an older instant count with that
// instant, as they may have landed last.
func (r *round) checkDevicesKept() *failure {
	for _, rd := range r.hist {
		switch rd.op.(type) {
		case core.ReadStatus, core.ReadStatuses:
		default:
			continue
		}
		if rd.err != nil {
			continue
		}
		for _, st := range rd.statuses() {
			listed := map[string]bool{}
			for _, d := range st.Devices {
				if d.State != core.StatusOffline {
					listed[d.ID] = true
				}
			}
			for _, dev := range raceDevices {
				ops := r.sessionOps(st.User, dev.id)
				var last *raceOp
				for _, o := range ops {
					if before(o, rd) && (last == nil || o.now > last.now) {
						last = o
					}
				}
				if last == nil {
					continue
				}
				h, bg := last.now, false
				for _, o := range ops {
					if overlapsSpan(o, last, rd) && o.now < h {
						h = o.now
					}
					if b, ok := beatOf(o, st.User, dev.id); ok && overlapsSpan(o, last, rd) && b.Background {
						bg = true
					}
				}
				if b, ok := beatOf(last, st.User, dev.id); ok && b.Background {
					bg = true
				}
				// A backgrounded device lives longer; count the shorter window.
				win := deviceWindow(dev.kind, false)
				if bg {
					win = min(win, deviceWindow(dev.kind, true))
				}
				if time.Duration(rd.now-h)*time.Millisecond > win {
					continue
				}
				ended := false
				for _, e := range r.enders(st.User, dev.id) {
					if overlapsSpan(e, last, rd) {
						ended = true
						break
					}
				}
				// Every script that loads the user deletes records past
				// their deadline at its own instant; one that took a later
				// instant may have landed before the read.
				for _, x := range r.hist {
					if overlapsSpan(x, last, rd) && loadsUser(x, st.User) && time.Duration(x.now-h)*time.Millisecond > win {
						ended = true
						break
					}
				}
				if !ended && !listed[dev.id] {
					return r.fail(propNoEarlyRemove, []*raceOp{last, rd},
						"status of %s at %s does not list device %s, which was seen at %s (window %v) and not ended since",
						st.User, r.x.rel(time.UnixMilli(rd.now)), dev.id, r.x.rel(time.UnixMilli(h)), win)
				}
			}
		}
	}
	return nil
}

// loadsUser reports whether o runs a script that loads user's records
// (and so deletes those past their deadline).
func loadsUser(o *raceOp, user string) bool {
	switch op := o.op.(type) {
	case core.SweepUsers:
		return o.err == nil && !o.held()
	case core.Heartbeat, core.HeartbeatBatch:
		for _, b := range o.beats() {
			if b.User == user {
				return true
			}
		}
	case core.Login:
		return op.User == user
	case core.Logout:
		return op.User == user
	case core.Disconnect:
		return op.User == user
	case core.SetManual:
		return op.User == user
	}
	return false
}

// touchesOf returns the operations that touched member in sc.
func (r *round) touchesOf(sc core.Scope, member string) []*raceOp {
	var out []*raceOp
	for _, o := range r.hist {
		ts, ok := o.op.(core.TouchBatch)
		if !ok || o.err != nil {
			continue
		}
		for _, t := range ts {
			if t.Scope == sc && t.Member == member {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

func (r *round) leavesOf(sc core.Scope, member string) []*raceOp {
	var out []*raceOp
	for _, o := range r.hist {
		if l, ok := o.op.(core.Leave); ok && l.Scope == sc && l.Member == member {
			out = append(out, o)
		}
	}
	return out
}

// mustBeLive returns the members that a read rd of sc must see within d of
// its instant: touched before rd began, within d of rd's instant (counting
// concurrent older touches), and not made to leave meanwhile.
func (r *round) mustBeLive(rd *raceOp, sc core.Scope, d time.Duration) ([]string, []*raceOp) {
	var out []string
	var why []*raceOp
	for _, m := range append([]string{steadyMember, earlyMember}, raceMembers...) {
		ts := r.touchesOf(sc, m)
		var last *raceOp
		for _, o := range ts {
			if before(o, rd) && (last == nil || o.now > last.now) {
				last = o
			}
		}
		if last == nil {
			continue
		}
		h := last.now
		for _, o := range ts {
			if overlapsSpan(o, last, rd) && o.now < h {
				h = o.now
			}
		}
		if time.Duration(rd.now-h)*time.Millisecond > d {
			continue
		}
		left := false
		for _, l := range r.leavesOf(sc, m) {
			if overlapsSpan(l, last, rd) {
				left = true
				break
			}
		}
		// A scope sweep removes members past the window at its own
		// instant; one that took a later instant may have landed first.
		for _, x := range r.hist {
			if _, ok := x.op.(core.SweepScopes); ok && x.err == nil && !x.held() && overlapsSpan(x, last, rd) &&
				time.Duration(x.now-h)*time.Millisecond > raceWindow {
				left = true
				break
			}
		}
		if !left {
			out = append(out, m)
			why = append(why, last)
		}
	}
	return out, why
}

// checkMembersKept: listings, live counts and ActiveWithin see every member
// touched within the window.
func (r *round) checkMembersKept() *failure {
	for _, rd := range r.hist {
		if rd.err != nil {
			continue
		}
		var sc core.Scope
		d, n := raceWindow, int64(0)
		switch op := rd.op.(type) {
		case core.ReadMembers:
			live, why := r.mustBeLive(rd, op.Scope, raceWindow)
			listed := map[string]bool{}
			for _, m := range as[core.MemberPage](rd.out).Members {
				listed[m.ID] = true
			}
			for i, m := range live {
				if !listed[m] {
					return r.fail(propNoEarlyRemove, []*raceOp{why[i], rd}, "members of %s at %s do not list %s, touched within the window",
						op.Scope, r.x.rel(time.UnixMilli(rd.now)), m)
				}
			}
			continue
		case core.ReadCount:
			if layoutOf(op.Scope.Class) == core.LayoutCompact {
				continue // a compact count is the last sweep's
			}
			sc, n = op.Scope, as[core.Count](rd.out).N
		case core.ReadActive:
			sc, d, n = op.Scope, op.Within, as[int64](rd.out)
		default:
			continue
		}
		{
			layout := layoutOf(sc.Class)
			live, why := r.mustBeLive(rd, sc, d)
			k := int64(len(live))
			if layout == core.LayoutApprox {
				k -= r.tolerance(k)
			}
			if n < k {
				return r.fail(propNoEarlyRemove, append(why, rd), "%s of %s at %s is %d, but %v were touched within %v",
					rd.name(), sc, r.x.rel(time.UnixMilli(rd.now)), n, live, d)
			}
		}
	}
	return nil
}

// checkStaleCounts: a count may only include members that no finished
// sweep has certainly removed. A member is certainly gone when a sweep
// that began after all its touches had returned, at an instant past the
// latest touch's window, returned before the count began.
func (r *round) checkStaleCounts() *failure {
	var sweeps []*raceOp
	for _, o := range r.hist {
		if _, ok := o.op.(core.SweepScopes); ok && o.err == nil && !o.held() {
			sweeps = append(sweeps, o)
		}
	}
	last := map[string]*raceOp{} // the previous cached count of a client and scope
	for _, c := range r.hist {
		rc, ok := c.op.(core.ReadCount)
		if !ok || c.err != nil || layoutOf(rc.Scope.Class) == core.LayoutApprox {
			continue
		}
		count := as[core.Count](c.out)
		if c.cached {
			// A cached count may lag (checkLinearizable lets it be older
			// than the model's), but never goes back in time for a reader.
			k := fmt.Sprint(c.client, rc.Scope)
			if p := last[k]; p != nil && count.AsOf.Before(as[core.Count](p.out).AsOf) {
				return r.fail(propNoStaleCount, []*raceOp{p, c}, "a cached count of %s went back from as-of %s to %s",
					rc.Scope, r.x.rel(as[core.Count](p.out).AsOf), r.x.rel(count.AsOf))
			}
			last[k] = c
			continue
		}
		var maybe []string
		var why []*raceOp
		for _, m := range append([]string{steadyMember, earlyMember}, raceMembers...) {
			var touches []*raceOp
			var tmax int64
			var lastRet int64
			for _, t := range r.touchesOf(rc.Scope, m) {
				if t.call <= c.ret {
					touches = append(touches, t)
					tmax = max(tmax, t.now)
					lastRet = max(lastRet, t.ret)
				}
			}
			if len(touches) == 0 {
				continue
			}
			var gone *raceOp
			for _, s := range sweeps {
				if s.ret < c.call && s.call > lastRet && time.Duration(s.now-tmax)*time.Millisecond > raceWindow {
					gone = s
					break
				}
			}
			if gone == nil {
				maybe = append(maybe, m)
			} else {
				why = append(why, gone, touches[len(touches)-1])
			}
		}
		if count.N > int64(len(maybe)) {
			return r.fail(propNoStaleCount, append(why, c), "count of %s at %s is %d; only %v may still be there",
				rc.Scope, r.x.rel(time.UnixMilli(c.now)), count.N, maybe)
		}
	}
	return nil
}

// checkEvents: the changes published are exactly the changes the
// operations returned, each once; each user's changes chain from OFFLINE
// back to OFFLINE (everyone is offline after the round's quiet end), so
// none is published twice and none is lost; kicks are published to their
// gateways.
func (r *round) checkEvents() *failure {
	var returned, kicks []string
	balance := map[string]map[core.Status]int{}
	var byUser = map[string][]*raceOp{}
	for _, o := range r.hist {
		for _, c := range o.allChanges() {
			returned = append(returned, r.x.change(c))
			if c.From == c.To {
				return r.fail(propOneEvent, []*raceOp{o}, "change %s does not change anything", r.x.change(c))
			}
			if balance[c.User] == nil {
				balance[c.User] = map[core.Status]int{}
			}
			balance[c.User][c.To]++
			balance[c.User][c.From]--
			byUser[c.User] = append(byUser[c.User], o)
		}
		for _, k := range as[core.LoginResult](o.out).Kicked {
			if k.Gateway != "" {
				kicks = append(kicks, r.x.kick(k))
			}
		}
	}
	for user, b := range balance {
		for st, n := range b {
			if n != 0 {
				return r.fail(propOneEvent, byUser[user], "the changes of %s do not chain from OFFLINE to OFFLINE: %s entered %d times more than left",
					user, st, n)
			}
		}
	}
	if r.opts.NoFeed || r.events == nil && len(returned)+len(kicks) == 0 {
		return nil
	}
	var got, gotKicks []string
	for _, ev := range r.events {
		if ev.Change != nil {
			got = append(got, r.x.change(*ev.Change))
		} else if ev.Kick != nil {
			gotKicks = append(gotKicks, r.x.kick(*ev.Kick))
		}
	}
	if d := diff(returned, got); d != "" {
		return r.fail(propOneEvent, nil, "the changes received through the subscription differ from those returned: %s", d)
	}
	if d := diff(kicks, gotKicks); d != "" {
		return r.fail(propOneEvent, nil, "the kicks received through the subscription differ from those returned: %s", d)
	}
	return nil
}

// diff compares two multisets of strings.
func diff(want, got []string) string {
	n := map[string]int{}
	for _, s := range want {
		n[s]++
	}
	for _, s := range got {
		n[s]--
	}
	var missing, extra []string
	for s, k := range n {
		for ; k > 0; k-- {
			missing = append(missing, s)
		}
		for ; k < 0; k++ {
			extra = append(extra, s)
		}
	}
	if len(missing)+len(extra) == 0 {
		return ""
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return fmt.Sprintf("missing %v, extra %v", missing, extra)
}

// touchesDevice reports whether o concerns user/dev's session.
func touchesDevice(o *raceOp, user, dev string) bool {
	if l, ok := o.op.(core.Login); ok {
		return l.User == user
	}
	if u, d, _, ok := o.ends(); ok {
		return u == user && d == dev
	}
	_, ok := beatOf(o, user, dev)
	return ok
}

// reissued reports whether a login (a retry with Login.Token) may have
// issued token again to user/dev between the end k and the heartbeat b.
func (r *round) reissued(user, dev, token string, k, b *raceOp) bool {
	for _, o := range r.hist {
		if l, ok := o.op.(core.Login); ok && o.err == nil && l.User == user && l.Device == dev &&
			as[core.LoginResult](o.out).Token == token && o.ret >= k.call && o.call <= b.ret {
			return true
		}
	}
	return false
}

// issue is a session token and the operation that handed it out.
type issue struct {
	token string
	by    *raceOp
}

// checkKickedTokens: once a login has kicked or replaced a session, or a
// logout has ended it, no heartbeat carrying its token is accepted. A login
// of a device supersedes every token the device was handed before it, of a
// live session or of one already ended, and later sessions of the device do
// not lift that (Config.KickFence, far longer than a round).
func (r *round) checkKickedTokens() *failure {
	issued := map[string][]issue{} // by user/device
	for _, o := range r.hist {
		if l, ok := o.op.(core.Login); ok {
			if o.err == nil {
				k := l.User + "/" + l.Device
				issued[k] = append(issued[k], issue{as[core.LoginResult](o.out).Token, o})
			}
			continue
		}
		beats := o.beats()
		for i, a := range o.acks() {
			if a.Err == nil && beats[i].Token == "" {
				k := beats[i].User + "/" + beats[i].Device
				issued[k] = append(issued[k], issue{a.Token, o})
			}
		}
	}
	killed := map[string]map[string]*raceOp{} // user/device → token → the operation that ended it
	killAll := func(key string, by *raceOp, except string) {
		for _, is := range issued[key] {
			if before(is.by, by) && is.token != except {
				if killed[key] == nil {
					killed[key] = map[string]*raceOp{}
				}
				if prev := killed[key][is.token]; prev == nil || by.ret < prev.ret {
					killed[key][is.token] = by
				}
			}
		}
	}
	for _, o := range r.hist {
		switch op := o.op.(type) {
		case core.Login:
			if o.err != nil {
				continue
			}
			res := as[core.LoginResult](o.out)
			killAll(op.User+"/"+op.Device, o, res.Token)
			for _, k := range res.Kicked {
				killAll(k.User+"/"+k.Device, o, res.Token)
			}
		case core.Logout:
			// Under PolicyMulti a logged-out token stays refused only until
			// its device's window ends (Config.KickFence): after that a
			// heartbeat carrying it is an implicit login.
			if o.err != nil || !as[core.Ended](o.out).Removed || r.cfg.Policy == core.PolicyMulti {
				continue
			}
			key := op.User + "/" + op.Device
			if op.Token != "" {
				if killed[key] == nil {
					killed[key] = map[string]*raceOp{}
				}
				if prev := killed[key][op.Token]; prev == nil || o.ret < prev.ret {
					killed[key][op.Token] = o
				}
			} else {
				killAll(key, o, "")
			}
		}
	}
	for _, o := range r.hist {
		beats := o.beats()
		if len(beats) == 0 || o.err != nil {
			continue
		}
		for i, b := range beats {
			if b.Token == "" || o.acks()[i].Err != nil {
				continue
			}
			k := killed[b.User+"/"+b.Device][b.Token]
			if k == nil || !before(k, o) || r.reissued(b.User, b.Device, b.Token, k, o) {
				continue
			}
			involved := []*raceOp{k, o}
			for _, x := range r.hist {
				if x.call <= o.ret && touchesDevice(x, b.User, b.Device) {
					involved = append(involved, x)
				}
			}
			return r.fail(propKickedToken, involved, "heartbeat of %s/%s with token %s was accepted after the session was ended",
				b.User, b.Device, b.Token)
		}
	}
	return nil
}
