package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// exceedMemory takes the server past its memory limit: it stores 2 MiB of
// junk, then lowers maxmemory to 1 MiB below what the server uses, so that
// every command that may grow memory is refused however small it is. It
// returns a function that lifts the limit.
func exceedMemory(tb testing.TB, srv *redistest.Instance) (lift func()) {
	tb.Helper()
	big := strings.Repeat("x", 64<<10)
	for i := range 32 {
		rig.Do(tb, srv, "SET", fmt.Sprintf("junk:%d", i), big)
	}
	used := rig.Info(tb, srv, "memory", "used_memory")
	rig.Do(tb, srv, "CONFIG", "SET", "maxmemory", strconv.FormatInt(used-1<<20, 10))
	if _, err := srv.Do("SET", "probe", "x"); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		tb.Fatalf("a write past maxmemory: %v, want OOM", err)
	}
	return func() { rig.Do(tb, srv, "CONFIG", "SET", "maxmemory", "0") }
}

// isOOM reports whether err carries the server's OOM refusal.
func isOOM(err error) bool { return err != nil && strings.Contains(err.Error(), "OOM") }

// withoutCounts drops the count keys from a snapshot: they cache a count,
// and a read under OOM may skip writing them.
func withoutCounts(snap map[string]string) map[string]string {
	for k := range snap {
		if strings.Contains(k, ":n:") {
			delete(snap, k)
		}
	}
	return snap
}

// oomStep is one call of the maxmemory test.
type oomStep struct {
	name    string
	advance time.Duration
	read    bool
	call    func(ctx context.Context, e *core.Engine) error
}

func oomSteps() []oomStep {
	room, video, fresh := core.Scope{Class: "room", ID: "r"}, core.Scope{Class: "video", ID: "v"}, core.Scope{Class: "video", ID: "never-counted"}
	hb := func(user, dev string) func(context.Context, *core.Engine) error {
		return func(ctx context.Context, e *core.Engine) error {
			_, err := e.Heartbeat(ctx, core.Heartbeat{User: user, Device: dev, Kind: core.KindWeb, Active: true})
			return err
		}
	}
	return []oomStep{
		{name: "Heartbeat (existing device)", call: hb("bob", "web")},
		{name: "Heartbeat (new device)", call: hb("erin", "web")},
		{name: "Heartbeat (user with an expired device)", call: hb("dave", "new")},
		{name: "HeartbeatBatch", call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.HeartbeatBatch(ctx, []core.Heartbeat{{User: "bob", Device: "web"}, {User: "carol", Device: "web"}, {User: "frank", Device: "web"}})
			return err
		}},
		{name: "Login", call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.Login(ctx, core.Login{User: "alice", Device: "phone", Kind: core.KindIOS})
			return err
		}},
		{name: "SetManual DND", call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.SetManual(ctx, "carol", core.ManualDND, 0)
			return err
		}},
		{name: "SetManual none", call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.SetManual(ctx, "carol", core.ManualNone, 0)
			return err
		}},
		{name: "TouchBatch", call: func(ctx context.Context, e *core.Engine) error {
			return e.TouchBatch(ctx, []core.ScopeTouch{{Scope: room, Member: "bob"}, {Scope: video, Member: "bob"}})
		}},
		{name: "Leave", call: func(ctx context.Context, e *core.Engine) error { _, err := e.Leave(ctx, room, "alice"); return err }},
		{name: "Logout", call: func(ctx context.Context, e *core.Engine) error { _, err := e.Logout(ctx, "bob", "web", ""); return err }},
		{name: "Disconnect", call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.Disconnect(ctx, "carol", "web", "")
			return err
		}},
		{name: "Statuses", read: true, call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.Statuses(ctx, []string{"alice", "bob", "carol", "dave", "erin"})
			return err
		}},
		{name: "Count(exact)", read: true, call: func(ctx context.Context, e *core.Engine) error { _, err := e.Count(ctx, room); return err }},
		{name: "Count(compact)", read: true, call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.Count(ctx, video)
			return err
		}},
		{name: "Count(compact, no count key yet)", read: true, call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.Count(ctx, fresh)
			return err
		}},
		{name: "Members", read: true, call: func(ctx context.Context, e *core.Engine) error { _, err := e.Members(ctx, room, "", 10); return err }},
		{name: "ActiveWithin", read: true, call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.ActiveWithin(ctx, video, time.Minute)
			return err
		}},
		{name: "SweepUsers (users due)", advance: 2 * time.Minute, call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.SweepUsers(ctx)
			return err
		}},
		{name: "SweepScopes (scopes due)", call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.SweepScopes(ctx)
			return err
		}},
		{name: "Statuses after the sweeps", read: true, call: func(ctx context.Context, e *core.Engine) error {
			_, err := e.Statuses(ctx, []string{"alice", "bob", "carol", "dave", "erin"})
			return err
		}},
	}
}

// TestMaxmemoryNoeviction runs the same calls on two servers, the one
// past its maxmemory under noeviction, the other unlimited, with one clock
// and one token stream. Under the limit, each write is either refused with
// the server's OOM error, retryable and leaving every key exactly as it
// was, or applied whole: then both servers hold the same data (count keys,
// a cache, aside), as they must since a script cannot be stopped
// half-way. Reads keep working, compact counts included. (Redis 7 refuses
// a script at its first write that may grow memory if it has written
// nothing yet; once it has written, for instance a delete, it runs to the
// end.) After a refusal the limited server takes the reference's data and
// the run goes on.
func TestMaxmemoryNoeviction(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			lim := redistest.Server(t, "--maxmemory-policy", "noeviction")
			ref := redistest.Server(t)
			clk := rig.NewClock(rig.T0)
			engLim := rig.Engine(t, a.Open(t, lim.Addr), core.Config{Clock: clk.Now, Rand: &seqRand{}})
			engRef := rig.Engine(t, a.Open(t, ref.Addr), core.Config{Clock: clk.Now, Rand: &seqRand{}})
			ctx := bounded(t, settle)
			both := func(what string, f func(ctx context.Context, e *core.Engine) error) {
				t.Helper()
				if err := f(ctx, engLim); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if err := f(ctx, engRef); err != nil {
					t.Fatalf("%s (reference): %v", what, err)
				}
			}
			// The state before the memory runs out.
			room, video, fresh := core.Scope{Class: "room", ID: "r"}, core.Scope{Class: "video", ID: "v"}, core.Scope{Class: "video", ID: "never-counted"}
			both("setup", func(ctx context.Context, e *core.Engine) error {
				if _, err := e.Login(ctx, core.Login{User: "alice", Device: "web", Gateway: "gw"}); err != nil {
					return err
				}
				for _, u := range []string{"bob", "carol"} {
					if _, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: "web", Active: true}); err != nil {
						return err
					}
				}
				_, err := e.Heartbeat(ctx, core.Heartbeat{User: "dave", Device: "old", Kind: core.KindWeb})
				if err != nil {
					return err
				}
				return e.TouchBatch(ctx, []core.ScopeTouch{{Scope: room, Member: "alice"}, {Scope: video, Member: "alice"}})
			})
			clk.Add(50 * time.Second)
			both("dave's second device", func(ctx context.Context, e *core.Engine) error {
				_, err := e.Heartbeat(ctx, core.Heartbeat{User: "dave", Device: "new", Kind: core.KindWeb})
				return err
			})
			clk.Add(20 * time.Second) // dave/old's window has passed; nobody swept it
			both("sweep and touch", func(ctx context.Context, e *core.Engine) error {
				if _, err := e.SweepScopes(ctx); err != nil {
					return err
				}
				return e.TouchBatch(ctx, []core.ScopeTouch{{Scope: video, Member: "carol"}, {Scope: fresh, Member: "carol"}})
			})
			for _, o := range engineOps(engLim, "load") { // every script once: no NOSCRIPT below
				both("load "+o.name, func(ctx context.Context, e *core.Engine) error {
					for _, o2 := range engineOps(e, "load") {
						if o2.name == o.name {
							return o2.call(ctx)
						}
					}
					return nil
				})
			}
			if d := rig.Diff(rig.Snapshot(t, ref, "presence"), rig.Snapshot(t, lim, "presence")); d != "" {
				t.Fatalf("the two servers differ before the test:\n%s", d)
			}

			lift := exceedMemory(t, lim)
			for _, st := range oomSteps() {
				clk.Add(st.advance)
				before := rig.Snapshot(t, lim, "presence")
				errLim := st.call(ctx, engLim)
				if err := st.call(ctx, engRef); err != nil {
					t.Fatalf("%s on the reference server: %v", st.name, err)
				}
				if errLim == nil {
					if d := rig.Diff(withoutCounts(rig.Snapshot(t, ref, "presence")), withoutCounts(rig.Snapshot(t, lim, "presence"))); d != "" {
						t.Errorf("%s under OOM was applied, not as on the reference server:\n%s", st.name, d)
					}
					if !st.read {
						t.Logf("%s: %s under OOM ran whole", a.Name, st.name)
					}
					continue
				}
				if !isOOM(errLim) || storeError(errLim) == nil {
					t.Errorf("%s under OOM: %v (%T), want a *core.StoreError with the server's OOM refusal", st.name, errLim, errLim)
				}
				if d := rig.Diff(before, rig.Snapshot(t, lim, "presence")); d != "" {
					t.Errorf("%s was refused under OOM but changed the data:\n%s", st.name, d)
				}
				switch {
				case st.read:
					t.Errorf("%s under OOM: %v; reads must keep working", st.name, errLim)
				case !errors.Is(errLim, core.ErrUnavailable):
					t.Errorf("%s under OOM: %v; a refused write must be retryable", st.name, errLim)
				default:
					t.Logf("%s: %s under OOM refused (retryable), nothing changed", a.Name, st.name)
				}
				// Catch up with the reference and limit again.
				lift()
				rig.CopyKeys(t, ref, lim, "presence")
				lift = exceedMemory(t, lim)
			}
			lift()
			// With the limit lifted, writes work again.
			for _, o := range engineOps(engLim, "after") {
				if err := o.call(ctx); err != nil {
					t.Errorf("%s after the limit was lifted: %v", o.name, err)
				}
			}
		})
	}
}

// TestCountUnderOOM: under maxmemory a compact count whose count key is
// missing is computed without caching it (count.lua once failed there),
// and a rueidis client-side-cache miss falls back to a plain GET (rueidis
// reads cached keys in MULTI/EXEC, which Redis refuses over maxmemory).
func TestCountUnderOOM(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t, "--maxmemory-policy", "noeviction")
			loadScripts(t, srv)
			eng := rig.Engine(t, a.Open(t, srv.Addr), core.Config{})
			ctx := bounded(t, settle)
			swept, fresh := core.Scope{Class: "video", ID: "swept"}, core.Scope{Class: "video", ID: "fresh"}
			if err := eng.Touch(ctx, swept, "m"); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.SweepScopes(ctx); err != nil { // writes swept's count key
				t.Fatal(err)
			}
			if err := eng.Touch(ctx, fresh, "m"); err != nil {
				t.Fatal(err)
			}
			lift := exceedMemory(t, srv)
			defer lift()
			for _, sc := range []core.Scope{swept, fresh} {
				if c, err := eng.Count(ctx, sc); err != nil || c.N != 1 || c.Stale {
					t.Errorf("Count(%s) under OOM: %+v, %v; want 1", sc.ID, c, err)
				}
			}
			if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web"}); !errors.Is(err, core.ErrUnavailable) || !isOOM(err) {
				t.Errorf("a heartbeat under OOM: %v; want a retryable OOM refusal", err)
			}
		})
	}
}
