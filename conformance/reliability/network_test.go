package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance/reliability/faultproxy"
	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// op is one engine call of the network tests.
type op struct {
	name string
	call func(ctx context.Context) error
}

// engineOps returns one of every kind of engine call, on users and scopes
// of their own (prefix keeps them apart between calls of the same test).
func engineOps(eng *core.Engine, prefix string) []op {
	u := prefix + "-user"
	room, video := core.Scope{Class: "room", ID: prefix}, core.Scope{Class: "video", ID: prefix}
	return []op{
		{"Heartbeat", func(ctx context.Context) error {
			_, err := eng.Heartbeat(ctx, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb, Active: true})
			return err
		}},
		{"HeartbeatBatch", func(ctx context.Context) error {
			beats := make([]core.Heartbeat, 40)
			for i := range beats {
				beats[i] = core.Heartbeat{User: fmt.Sprintf("%s-%d", u, i), Device: "web", Kind: core.KindWeb}
			}
			_, err := eng.HeartbeatBatch(ctx, beats)
			return err
		}},
		{"Login", func(ctx context.Context) error {
			_, err := eng.Login(ctx, core.Login{User: u, Device: "phone", Kind: core.KindIOS, Gateway: "gw"})
			return err
		}},
		{"Status", func(ctx context.Context) error { _, err := eng.Status(ctx, u); return err }},
		{"TouchBatch", func(ctx context.Context) error {
			return eng.TouchBatch(ctx, []core.ScopeTouch{{Scope: room, Member: u}, {Scope: video, Member: u}})
		}},
		{"Count", func(ctx context.Context) error { _, err := eng.Count(ctx, room); return err }},
		{"Members", func(ctx context.Context) error { _, err := eng.Members(ctx, video, "", 10); return err }},
		{"SetManual", func(ctx context.Context) error {
			_, err := eng.SetManual(ctx, u, core.ManualDND, time.Minute)
			return err
		}},
		{"SweepUsers", func(ctx context.Context) error { _, err := eng.SweepUsers(ctx); return err }},
		{"SweepScopes", func(ctx context.Context) error { _, err := eng.SweepScopes(ctx); return err }},
		{"Disconnect", func(ctx context.Context) error { _, err := eng.Disconnect(ctx, u, "web", ""); return err }},
	}
}

// runOps runs ops concurrently, each with its own deadline, and returns
// their errors and how long each took.
func runOps(ops []op, deadline time.Duration) ([]error, []time.Duration) {
	errs := make([]error, len(ops))
	took := make([]time.Duration, len(ops))
	var wg sync.WaitGroup
	for i, o := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			errs[i] = o.call(ctx)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	return errs, took
}

// allSucceed runs ops one after another with a generous deadline.
func allSucceed(ops []op) (bool, string) {
	for _, o := range ops {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := o.call(ctx)
		cancel()
		if err != nil {
			return false, fmt.Sprintf("%s: %v", o.name, err)
		}
	}
	return true, ""
}

// TestBlackholeDeadlinesHold black-holes the network under every kind of
// call: each returns a retryable error by its deadline (a count read
// before returns its last good value marked stale), and once the network
// is back every call succeeds again.
func TestBlackholeDeadlinesHold(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			p := faultproxy.Start(t, srv.Addr)
			eng := rig.Engine(t, a.Open(t, p.Addr()), timedConfig("presence"))
			if ok, why := allSucceed(engineOps(eng, "warm")); !ok {
				t.Fatal(why)
			}
			p.Blackhole(true)
			const deadline = 400 * time.Millisecond
			ops := engineOps(eng, "warm")
			errs, took := runOps(ops, deadline)
			for i, o := range ops {
				switch {
				case o.name == "Count" && errs[i] == nil:
					// Served from the last good count; checked below.
				case !errors.Is(errs[i], core.ErrUnavailable):
					t.Errorf("%s through a black hole: %v, want a retryable error", o.name, errs[i])
				}
				if took[i] > deadline+overrunSlack {
					t.Errorf("%s through a black hole returned after %v, past its %v deadline", o.name, took[i], deadline)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			c, err := eng.Count(ctx, core.Scope{Class: "room", ID: "warm"})
			cancel()
			if err != nil || !c.Stale || c.N != 1 {
				t.Errorf("count through a black hole: %+v, %v; want the last good 1 marked stale", c, err)
			}
			longest := time.Duration(0)
			for _, d := range took {
				longest = max(longest, d)
			}
			p.Blackhole(false)
			back := poll(t, settle, "every call succeeding after the black hole", func() (bool, string) {
				return allSucceed(engineOps(eng, "after"))
			})
			t.Logf("FIGURE blackhole adapter=%s deadline=%v longest_call=%v recovered_in=%v",
				a.Name, deadline, longest.Round(time.Millisecond), back.Round(time.Millisecond))
		})
	}
}

// TestSlowNetworkDeadlinesHold delays every packet: calls whose deadline is
// shorter than the round trip fail retryably by their deadline; calls with
// room to spare succeed.
func TestSlowNetworkDeadlinesHold(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			p := faultproxy.Start(t, srv.Addr)
			eng := rig.Engine(t, a.Open(t, p.Addr()), timedConfig("presence"))
			if ok, why := allSucceed(engineOps(eng, "warm")); !ok {
				t.Fatal(why)
			}
			p.SetDelay(150 * time.Millisecond) // a round trip takes at least 300 ms
			const short = 100 * time.Millisecond
			ops := engineOps(eng, "slow")
			errs, took := runOps(ops, short)
			for i, o := range ops {
				if !errors.Is(errs[i], core.ErrUnavailable) && !(o.name == "Count" && errs[i] == nil) {
					t.Errorf("%s with a %v deadline over a 300 ms round trip: %v, want a retryable error", o.name, short, errs[i])
				}
				if took[i] > short+overrunSlack {
					t.Errorf("%s returned after %v, past its %v deadline", o.name, took[i], short)
				}
			}
			// With room to spare every call gets through. A connection a
			// timed-out call left behind may still be delivering; poll.
			poll(t, settle, "calls with a long deadline succeeding over the slow network", func() (bool, string) {
				errs, _ := runOps(engineOps(eng, "slow-ok"), 5*time.Second)
				for i, err := range errs {
					if err != nil {
						return false, fmt.Sprintf("%s: %v", ops[i].name, err)
					}
				}
				return true, ""
			})
		})
	}
}

// TestConnectionsCutMidCall resets every connection while calls are in
// flight: each call either succeeds or fails retryably, and afterwards the
// client's pool recovers, costing at most one failed call per connection
// that was open at the cut.
func TestConnectionsCutMidCall(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			p := faultproxy.Start(t, srv.Addr)
			eng := rig.Engine(t, a.Open(t, p.Addr()), timedConfig("presence"))
			// Fill the pool with connections: many calls at once.
			var ops []op
			for i := range 4 {
				ops = append(ops, engineOps(eng, fmt.Sprintf("fill-%d", i))...)
			}
			errs, _ := runOps(ops, 5*time.Second)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("%s before the cut: %v", ops[i].name, err)
				}
			}
			p.Blackhole(true)
			done := make(chan []error, 1)
			go func() {
				errs, _ := runOps(ops, 5*time.Second)
				done <- errs
			}()
			poll(t, settle, "calls in flight", func() (bool, string) { return p.Held() > 0, "nothing held yet" })
			open := p.Open()
			p.Cut()
			p.Blackhole(false)
			select {
			case errs = <-done:
			case <-time.After(settle):
				t.Fatal("calls cut mid-flight did not return")
			}
			failed := 0
			for i, err := range errs {
				if err != nil {
					failed++
					if !errors.Is(err, core.ErrUnavailable) {
						t.Errorf("%s cut mid-call: %v, want success or a retryable error", ops[i].name, err)
					}
				}
			}
			// Recovery: one call at a time until 20 in a row succeed.
			after, streak := 0, 0
			one := engineOps(eng, "after")
			for i := 0; streak < 20; i++ {
				if i > 20+open+10 {
					t.Fatalf("the pool did not recover: %d failures after the cut with %d connections open at it", after, open)
				}
				o := one[i%len(one)]
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err := o.call(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, core.ErrUnavailable) {
						t.Fatalf("%s after the cut: %v, want success or a retryable error", o.name, err)
					}
					after++
					streak = 0
					continue
				}
				streak++
			}
			if after > open {
				t.Errorf("%d calls failed after the cut, more than the %d connections open at it", after, open)
			}
			t.Logf("FIGURE cut adapter=%s open_at_cut=%d in_flight_failed=%d/%d failed_after=%d", a.Name, open, failed, len(ops), after)
		})
	}
}
