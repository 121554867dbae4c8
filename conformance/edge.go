package conformance

import (
	"context"
	"math/rand"
	"slices"
	"strconv"
	"time"

	"github.com/presencekit/presence/core"
)

// edgeOp moves the clock to the edge of a rule and sweeps there. Every rule
// of time (a device's interval and deadline, IdleAfter, PushWindow,
// LeaveDelay, CoalesceWindow, KickFence, a manual status's end, a scope's
// window and sweep interval) ends at an instant some earlier step set plus
// one of the configuration's durations, and is decided by a comparison at its
// last millisecond and the next. Random advances seldom land on either
// (the clock moves by even, non-round amounts), so a sweep that took a
// device for gone 1 ms before its deadline went unnoticed: this step lands
// on them by construction. It resolves when it runs (system.edge): the
// instants of the sequence's earlier steps (marks), each plus d plus off,
// that lie ahead; the back-th nearest of them, or now if none does.
//
// With state set, the instants are instead those the model's state holds
// ahead: each live device's deadline and, in the foreground, the instant it
// goes idle, a manual status's end, or each scope member's last instant in
// its window. Those are the edges that decide a device or member, which
// marks reach only when d happens to be the right duration.
type edgeOp struct {
	state  bool
	back   int
	d      time.Duration
	off    time.Duration // -1 ms, 0 or +1 ms
	scopes bool
}

func (o edgeOp) String() string {
	what := "sweep users"
	if o.scopes {
		what = "sweep scopes"
	}
	from := "a mark + " + o.d.String()
	if o.state {
		from = "an instant of the state"
	}
	return "edge " + what + " at " + from + offString(o.off) + " (#" + strconv.Itoa(o.back) + " ahead)"
}

func offString(off time.Duration) string {
	switch {
	case off > 0:
		return " + " + off.String()
	case off < 0:
		return " - " + (-off).String()
	}
	return ""
}

// sweep is the sweep the step runs at the edge.
func (o edgeOp) sweep() call {
	if o.scopes {
		return call{op: core.SweepScopes{}}
	}
	return call{op: core.SweepUsers{}}
}

// run sweeps; system.do has moved the clock to the edge before.
func (o edgeOp) run(x *runner, p core.Presence) obs { return o.sweep().run(x, p) }

// edgeDurations are the durations a rule of configuration c adds to an
// instant: the deadlines of each kind (twice its interval) and of a device
// in the background (PushWindow), IdleAfter, LeaveDelay and CoalesceWindow
// when on, KickFence when a sequence can reach it, the scope classes'
// windows, sweep intervals and approx bucket, and 0 (a mark that is itself
// an end: a manual status's).
func (c seqConfig) edgeDurations(scopes bool) []time.Duration {
	cfg := c.config("", true)
	var ds []time.Duration
	if scopes {
		ds = append(ds, 0)
		for _, cl := range cfg.Classes {
			ds = append(ds, cl.Window, cl.SweepInterval)
			if cl.Bucket > 0 {
				ds = append(ds, cl.Bucket)
			}
		}
	} else {
		ds = append(ds, 0, cfg.IdleAfter, cfg.PushWindow)
		for _, iv := range cfg.Intervals {
			ds = append(ds, 2*iv)
		}
		for _, d := range []time.Duration{cfg.LeaveDelay, cfg.CoalesceWindow} {
			if d > 0 {
				ds = append(ds, d)
			}
		}
		// a sequence lasts well under an hour of virtual time (see
		// graceWall): a longer fence never ends inside one
		if cfg.KickFence <= 2*time.Minute {
			ds = append(ds, cfg.KickFence)
		}
	}
	slices.Sort(ds)
	return slices.Compact(ds)
}

// randomEdgeOp draws an edge of configuration c: a user sweep, or a scope
// sweep when scopes is set, at the last millisecond of a rule or the next.
func (c seqConfig) randomEdgeOp(r *rand.Rand, scopes bool) edgeOp {
	o := edgeOp{state: r.Intn(2) == 0, back: pick(r, 0, 0, 1, 2),
		off: pick(r, -time.Millisecond, 0, time.Millisecond), scopes: scopes}
	if !o.state {
		o.d = pick(r, c.edgeDurations(scopes)...)
	}
	return o
}

// edgeTarget resolves o at now against the marks or the model's instants
// ahead (state); virtual says whether the backend expires keys in virtual
// time. On such a backend (miniredis, expired at TTL 0 where Redis expires
// below 0) no step may run at an odd instant that reads a key expiring
// then: user keys live a day, but scope keys live a window plus the odd key
// grace, so there a scope sweep's odd instant becomes the next, even, one.
func (o edgeOp) edgeTarget(marks, state []time.Time, now time.Time, virtual bool) time.Time {
	var ahead []time.Time
	from, d := marks, o.d
	if o.state {
		from, d = state, 0
	}
	for _, m := range from {
		if t := m.Add(d + o.off); t.After(now) {
			ahead = append(ahead, t)
		}
	}
	if len(ahead) == 0 {
		return now
	}
	slices.SortFunc(ahead, func(a, b time.Time) int { return a.Compare(b) })
	ahead = slices.CompactFunc(ahead, time.Time.Equal)
	t := ahead[min(o.back, len(ahead)-1)]
	if virtual && o.scopes && t.UnixMilli()%2 != 0 {
		t = t.Add(time.Millisecond)
	}
	return t
}

// marker is a step that sets instants besides its own, which later edges
// start from.
type marker interface {
	marks(now time.Time) []time.Time
}

// marks are a beat's client time in the past and a manual status's end.
func (c call) marks(now time.Time) []time.Time {
	if m, ok := c.op.(core.SetManual); ok && m.TTL > 0 {
		return []time.Time{now.Add(m.TTL)}
	}
	return symMarks(c.syms, now)
}

func (o concOp) marks(now time.Time) []time.Time { return symMarks(o.syms, now) }

func symMarks(syms []sym, now time.Time) []time.Time {
	var ms []time.Time
	for _, s := range syms {
		if s.at == 1 {
			ms = append(ms, now.Add(-1500*time.Millisecond))
		}
	}
	return ms
}

// edges returns the instants the model's state holds (see edgeOp), at now,
// for configuration cfg.
func (o *oracle) edges(now time.Time, cfg core.Config, scopes bool) []time.Time {
	ctx := context.Background()
	o.clk.ns.Store(now.UnixNano())
	var out []time.Time
	if scopes {
		for _, sc := range genScopes {
			v, err := o.m.Do(ctx, core.ReadMembers{Scope: sc, Limit: 1000})
			if err != nil { // approx scopes list no members
				continue
			}
			page := v.(core.MemberPage)
			for _, m := range page.Members {
				out = append(out, m.LastSeen.Add(cfg.Classes[sc.Class].Window))
			}
		}
		return out
	}
	v, err := o.m.Do(ctx, core.ReadStatuses{Users: append(append([]string(nil), genUsers...), concUsers...)})
	if err != nil {
		return nil
	}
	sts := v.([]core.UserStatus)
	for _, st := range sts {
		if !st.ManualUntil.IsZero() {
			out = append(out, st.ManualUntil)
		}
		for _, d := range st.Devices {
			if d.Background {
				out = append(out, d.LastSeen.Add(cfg.PushWindow))
				continue
			}
			out = append(out, d.LastSeen.Add(2*cfg.Intervals[d.Kind]), d.LastActive.Add(cfg.IdleAfter))
		}
	}
	return out
}
