package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// serverTime reads the server's clock.
func serverTime(tb testing.TB, srv *redistest.Instance) time.Time {
	tb.Helper()
	r, ok := rig.Do(tb, srv, "TIME").([]any)
	if !ok || len(r) != 2 {
		tb.Fatalf("TIME: %v", r)
	}
	sec, _ := strconv.ParseInt(fmt.Sprint(r[0]), 10, 64)
	usec, _ := strconv.ParseInt(fmt.Sprint(r[1]), 10, 64)
	return time.Unix(sec, usec*1000)
}

// TestSkewedHostsMoveNobody runs the engine on the server's clock (the
// default) behind gateways whose own clocks are off: one steps back and
// forth by minutes (an injected clock), others are skewed for good. Their
// heartbeats carry client timestamps from those clocks. Liveness is judged
// by the server's clock alone: a timestamp within the skew guard
// (MaxSkew, 5 minutes) is accepted and at most moves last-active earlier
// (never into the future), so nobody goes on- or offline by it; one beyond
// the guard is refused with ErrClockSkew and changes nothing.
func TestSkewedHostsMoveNobody(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng := rig.Engine(t, a.Open(t, srv.Addr), core.Config{})
			ctx := bounded(t, settle)
			host := rig.NewClock(time.Now())
			beat := func(user string, skew time.Duration) (core.Ack, error) {
				host.Set(time.Now().Add(skew))
				return eng.Heartbeat(ctx, core.Heartbeat{User: user, Device: "web", Kind: core.KindWeb, Active: true, At: host.Now()})
			}
			for _, skew := range []time.Duration{0, -3 * time.Minute, 3 * time.Minute, -4*time.Minute - 50*time.Second, 4*time.Minute + 50*time.Second, 0} {
				before := serverTime(t, srv)
				if _, err := beat("stepping", skew); err != nil {
					t.Fatalf("a host %v off: %v", skew, err)
				}
				after := serverTime(t, srv)
				st, err := eng.Status(ctx, "stepping")
				if err != nil || len(st.Devices) != 1 {
					t.Fatalf("status: %+v, %v", st, err)
				}
				d := st.Devices[0]
				// Last seen is the server's time, whatever the host says.
				if d.LastSeen.Before(before.Add(-time.Millisecond)) || d.LastSeen.After(after.Add(time.Millisecond)) {
					t.Errorf("a host %v off: last seen %v, want the server's time in [%v, %v]", skew, d.LastSeen, before, after)
				}
				// Last active never runs ahead of the server.
				if d.LastActive.After(after.Add(time.Millisecond)) {
					t.Errorf("a host %v off: last active %v is after the server's %v", skew, d.LastActive, after)
				}
				// Within the guard nobody moves: the device stays ONLINE.
				if st.Status != core.StatusOnline || d.State != core.StatusOnline {
					t.Errorf("a host %v off: %v / %v, want ONLINE", skew, st.Status, d.State)
				}
			}
			// Beyond the guard: refused, nothing changes, either way.
			snap := rig.Snapshot(t, srv, "presence")
			for _, skew := range []time.Duration{-5*time.Minute - 10*time.Second, 5*time.Minute + 10*time.Second, -time.Hour, 24 * time.Hour} {
				if _, err := beat("stepping", skew); !errors.Is(err, core.ErrClockSkew) {
					t.Errorf("a host %v off: %v, want ErrClockSkew", skew, err)
				}
				if _, err := beat("newcomer", skew); !errors.Is(err, core.ErrClockSkew) {
					t.Errorf("a new device on a host %v off: %v, want ErrClockSkew", skew, err)
				}
			}
			if d := rig.Diff(snap, rig.Snapshot(t, srv, "presence")); d != "" {
				t.Errorf("refused heartbeats changed the data:\n%s", d)
			}
			if st, err := eng.Status(ctx, "newcomer"); err != nil || st.Status != core.StatusOffline {
				t.Errorf("a device whose every heartbeat was refused: %+v, %v", st, err)
			}
		})
	}
}

// clockRun drives an engine on an injected clock, sweeping every 5 s of
// engine time, and records every published change.
type clockRun struct {
	t       *testing.T
	eng     *core.Engine
	clk     *rig.Clock
	ctx     context.Context
	tokens  map[string]string
	changes []core.Change
}

func (r *clockRun) beat(user string) {
	r.t.Helper()
	ack, err := r.eng.Heartbeat(r.ctx, core.Heartbeat{User: user, Device: "web", Kind: core.KindWeb, Active: true, Token: r.tokens[user]})
	if err != nil {
		r.t.Fatalf("%s's heartbeat at %v: %v", user, r.clk.Now().Sub(rig.T0), err)
	}
	r.tokens[user] = ack.Token
	r.changes = append(r.changes, ack.Changes...)
}

func (r *clockRun) sweep() {
	r.t.Helper()
	rep, err := r.eng.SweepUsers(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	r.changes = append(r.changes, rep.Changes...)
}

func (r *clockRun) status(user string) core.Status {
	r.t.Helper()
	st, err := r.eng.Status(r.ctx, user)
	if err != nil {
		r.t.Fatal(err)
	}
	return st.Status
}

// offlineEvents counts the OFFLINE changes published for user.
func (r *clockRun) offlineEvents(user string) int {
	n := 0
	for _, c := range r.changes {
		if c.User == user && c.To == core.StatusOffline {
			n++
		}
	}
	return n
}

// TestEngineClockSteps steps the engine's own clock (an injected clock
// standing for the server's) back by 3 minutes and later forward again,
// while one user heartbeats every 20 s of real time and another stopped
// just before the step. Going back, the heartbeating user is never shown
// or announced OFFLINE, and the stopped user goes OFFLINE at most the
// step's size late. Going forward, the heartbeating user's session
// survives (its next heartbeat, with its token, is accepted) and shows it
// ONLINE again at once, and nothing is announced: LeaveDelay counts from
// when the engine sees the user offline, not from the window's end that
// the step moved minutes into the past (counted from there, every user
// would flap OFFLINE and ONLINE on a forward step).
func TestEngineClockSteps(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			clk := rig.NewClock(rig.T0)
			r := &clockRun{t: t, eng: rig.Engine(t, a.Open(t, srv.Addr), core.Config{Clock: clk.Now}), clk: clk, ctx: bounded(t, settle), tokens: map[string]string{}}
			const step = 3 * time.Minute
			// tick advances real time by 5 s; steady beats every 20 s.
			elapsed := time.Duration(0)
			tick := func() {
				clk.Add(5 * time.Second)
				elapsed += 5 * time.Second
				if elapsed%(20*time.Second) == 0 {
					r.beat("steady")
				}
				r.sweep()
			}
			r.beat("steady")
			r.beat("stopped")
			for range 6 {
				tick()
			}
			r.beat("stopped") // its last heartbeat
			stoppedAt := elapsed

			// Backward step.
			clk.Add(-step)
			offlineAfter := time.Duration(-1)
			for elapsed < stoppedAt+step+3*time.Minute {
				tick()
				if r.status("steady") != core.StatusOnline {
					t.Fatalf("after the backward step, at %v: steady is %v", elapsed, r.status("steady"))
				}
				if offlineAfter < 0 && r.status("stopped") == core.StatusOffline {
					offlineAfter = elapsed - stoppedAt
				}
			}
			if r.offlineEvents("steady") != 0 {
				t.Errorf("the backward step announced the heartbeating user OFFLINE %d times", r.offlineEvents("steady"))
			}
			// Without a step, stopped would be OFFLINE 60 s after its last
			// heartbeat; the step may delay that by the step's size, no more.
			if offlineAfter < 0 || offlineAfter > time.Minute+step+5*time.Second {
				t.Errorf("the stopped user went OFFLINE %v after its last heartbeat, want at most %v", offlineAfter, time.Minute+step)
			}
			if r.offlineEvents("stopped") != 1 {
				t.Errorf("the stopped user was announced OFFLINE %d times, want once", r.offlineEvents("stopped"))
			}

			// Forward step, between two heartbeats of steady.
			before := len(r.changes)
			clk.Add(step)
			r.sweep()
			shownOffline := r.status("steady") == core.StatusOffline
			flaps := r.offlineEvents("steady")
			for elapsed%(20*time.Second) != 0 {
				clk.Add(5 * time.Second)
				elapsed += 5 * time.Second
			}
			r.beat("steady") // with its token: the session survived
			if st := r.status("steady"); st != core.StatusOnline {
				t.Errorf("after its next heartbeat steady is %v, want ONLINE", st)
			}
			for range 12 {
				tick()
				if st := r.status("steady"); st != core.StatusOnline {
					t.Fatalf("after the forward step, at %v: steady is %v", elapsed, st)
				}
			}
			if flaps != 0 || len(r.changes) != before {
				t.Errorf("the forward step announced %v for a user heartbeating on time", r.changes[before:])
			}
			t.Logf("FIGURE clock-step adapter=%s back: stopped OFFLINE after %v (60s without a step); forward %v: steady shown OFFLINE until its next heartbeat: %v, announced OFFLINE %d times, events after the step %v",
				a.Name, offlineAfter, step, shownOffline, flaps, r.changes[before:])
		})
	}
}
