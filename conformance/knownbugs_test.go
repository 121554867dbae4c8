package conformance_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// Regression tests for bugs the conformance suite found outside this
// package. Each is skipped until fixed; run them with
//
//	PRESENCE_CONFORMANCE_KNOWN_BUGS=1 go test ./conformance -run KnownBug
//
// which also makes the generated sequences stop steering around them.

func skipKnownBug(t *testing.T, what string) {
	t.Helper()
	if os.Getenv(conformance.EnvKnownBugs) != "1" {
		t.Skip("known bug: " + what)
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// manualClock is a clock the tests move by hand.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }

// miniEngine returns an engine on a fresh miniredis whose clock and key
// expiry follow clk.
func miniEngine(t *testing.T, clk *manualClock, cfg core.Config) (*core.Engine, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.SetTime(clk.t)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	cfg.Clock = clk.Now
	e, err := core.New(goredis.New(c), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, mr
}

// TestSpreadCountAsOf checks that Count of a compact scope with Spread set
// and no count key yet reports the instant of the count as AsOf, as the Model and an unspread scope do. The peek branch
// of lua/count.lua replies {now, -1, 0} for a missing count key, so
// Engine.count must hand countSpread that reply's now, not its asOf of 0.
func TestSpreadCountAsOf(t *testing.T) {
	clk := &manualClock{t: t0}
	classes := map[string]core.ScopeClass{"video": {Layout: core.LayoutCompact, Shards: 5, Spread: true}}
	e, _ := miniEngine(t, clk, core.Config{Classes: classes})
	m, err := core.NewModel(core.Config{Clock: clk.Now, Classes: classes})
	if err != nil {
		t.Fatal(err)
	}
	sc := core.Scope{Class: "video", ID: "v1"}
	for name, p := range map[string]core.Presence{"engine": e, "model": m} {
		c, err := opdo.Do[core.Count](context.Background(), p, core.ReadCount{Scope: sc})
		if err != nil {
			t.Fatal(err)
		}
		if !c.AsOf.Equal(t0) {
			t.Errorf("%s: Count of an empty spread scope: AsOf %v, want %v", name, c.AsOf, t0)
		}
	}
}

// TestKickedTokenFenced checks that under PolicyMulti a session kicked by
// a login stays refused for Config.KickFence, not just for its device
// window: past the window, a heartbeat with the old token would otherwise
// pass for an implicit login.
func TestKickedTokenFenced(t *testing.T) {
	ctx := context.Background()
	clk := &manualClock{t: t0}
	e, mr := miniEngine(t, clk, core.Config{})
	m, err := core.NewModel(core.Config{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]core.Presence{"engine": e, "model": m} {
		clk.t = t0
		mr.SetTime(clk.t)
		l1, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d1", Kind: core.KindWeb, Gateway: "g1"})
		if err != nil {
			t.Fatal(err)
		}
		ex := core.PolicyExclusive
		if r, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d2", Kind: core.KindWeb, Policy: &ex}); err != nil || len(r.Kicked) != 1 {
			t.Fatalf("exclusive login: %+v, %v", r, err)
		}
		clk.t = t0.Add(61 * time.Second) // past the web window, well within KickFence
		mr.SetTime(clk.t)
		ack, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d1", Kind: core.KindWeb, Token: l1.Token})
		if !errors.Is(err, core.ErrSessionReplaced) {
			t.Errorf("%s: heartbeat with the kicked token 61 s later: token %q, err %v; want ErrSessionReplaced", name, ack.Token, err)
		}
	}
}

// TestKickFenceAllTokens checks that under PolicyMulti the fence of
// Config.KickFence refuses every token a device was handed before, not only
// its latest: when the kicked device logs in again and that newer session is
// kicked too, a heartbeat carrying the first kicked token is refused. A fence
// that held one token, with every other taken for a new session, would let
// that heartbeat in as an implicit login long before KickFence had passed.
func TestKickFenceAllTokens(t *testing.T) {
	ctx := context.Background()
	clk := &manualClock{t: t0}
	e, mr := miniEngine(t, clk, core.Config{})
	m, err := core.NewModel(core.Config{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ex := core.PolicyExclusive
	for name, p := range map[string]core.Presence{"engine": e, "model": m} {
		set := func(d time.Duration) {
			clk.t = t0.Add(d)
			mr.SetTime(clk.t)
		}
		set(0)
		l1, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d1", Kind: core.KindWeb})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d2", Kind: core.KindWeb, Policy: &ex}); err != nil {
			t.Fatal(err)
		}
		set(time.Second)
		if _, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d1", Kind: core.KindWeb}); err != nil {
			t.Fatal(err)
		}
		if r, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d2", Kind: core.KindWeb, Policy: &ex}); err != nil || len(r.Kicked) == 0 {
			t.Fatalf("second exclusive login: %+v, %v", r, err)
		}
		set(2 * time.Second)
		ack, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d1", Kind: core.KindWeb, Token: l1.Token})
		if !errors.Is(err, core.ErrSessionReplaced) {
			t.Errorf("%s: heartbeat with a token kicked 2 s ago: token %q, err %v; want ErrSessionReplaced", name, ack.Token, err)
		}
	}
}

// TestKickFenceOutlivesLaterSession checks that under PolicyMulti a
// device's fence outlives its session records, for a stale client of a
// device that has logged in again and comes back with its old token. A
// fence kept only in the device's one record, which the next login
// replaces, would be forgotten once that later session ends (disconnected:
// the record deleted; logged out: its own fence lasting only to the end of
// its window; or expired), and a heartbeat carrying the earlier token would
// pass for an implicit login long before KickFence had passed. So a session
// record implies the fence its start set, and the fence gets a hash field of
// its own when the record goes before the fence ends (lua/recordlib.lua).
//
// Each case hands u/d1 a token T1 and has it superseded one way (kicked by
// another device's login, replaced by a login of d1 while live, or ended
// before d1's next login); d1 logs in again
// (T2) by t0+1s at the latest; that session ends one way; then a heartbeat
// of d1 carries T1, less than KickFence (1 h) after T1 was superseded:
// ErrSessionReplaced (docs/design.md §8), on the engine and the model.
func TestKickFenceOutlivesLaterSession(t *testing.T) {
	ctx := context.Background()
	ex := core.PolicyExclusive
	web := func(dev string) core.Login { return core.Login{User: "u", Device: dev, Kind: core.KindWeb} }
	// Each way of superseding returns T1 and T2, the token of d1's later session.
	type setFunc = func(time.Duration)
	supersede := []struct {
		name string
		run  func(p core.Presence, set setFunc) (t1, t2 string, err error)
	}{
		{"kicked by another device", func(p core.Presence, set setFunc) (string, string, error) {
			l1, err := opdo.Do[core.LoginResult](ctx, p, web("d1"))
			if err != nil {
				return "", "", err
			}
			kick := web("d2")
			kick.Policy = &ex
			if _, err := opdo.Do[core.LoginResult](ctx, p, kick); err != nil {
				return "", "", err
			}
			set(time.Second)
			l2, err := opdo.Do[core.LoginResult](ctx, p, web("d1"))
			return l1.Token, l2.Token, err
		}},
		{"replaced by a login of its device", func(p core.Presence, set setFunc) (string, string, error) {
			l1, err := opdo.Do[core.LoginResult](ctx, p, web("d1"))
			if err != nil {
				return "", "", err
			}
			set(time.Second)
			l2, err := opdo.Do[core.LoginResult](ctx, p, web("d1"))
			return l1.Token, l2.Token, err
		}},
		{"disconnected before the next login", func(p core.Presence, set setFunc) (string, string, error) {
			l1, err := opdo.Do[core.LoginResult](ctx, p, web("d1"))
			if err != nil {
				return "", "", err
			}
			if _, err := opdo.Do[core.Ended](ctx, p, core.Disconnect{User: "u", Device: "d1", Token: l1.Token}); err != nil {
				return "", "", err
			}
			set(time.Second)
			l2, err := opdo.Do[core.LoginResult](ctx, p, web("d1"))
			return l1.Token, l2.Token, err
		}},
		{"an implicit login's, disconnected before the next login", func(p core.Presence, set setFunc) (string, string, error) {
			ack, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d1", Kind: core.KindWeb})
			if err != nil {
				return "", "", err
			}
			if _, err := opdo.Do[core.Ended](ctx, p, core.Disconnect{User: "u", Device: "d1", Token: ack.Token}); err != nil {
				return "", "", err
			}
			set(time.Second)
			l2, err := opdo.Do[core.LoginResult](ctx, p, web("d1"))
			return ack.Token, l2.Token, err
		}},
	}
	ends := []struct {
		name string
		run  func(p core.Presence, t2 string, set setFunc) error
	}{
		{"disconnect", func(p core.Presence, t2 string, set setFunc) error {
			_, err := opdo.Do[core.Ended](ctx, p, core.Disconnect{User: "u", Device: "d1", Token: t2})
			set(2 * time.Second)
			return err
		}},
		{"logout", func(p core.Presence, t2 string, set setFunc) error {
			_, err := opdo.Do[core.Ended](ctx, p, core.Logout{User: "u", Device: "d1", Token: t2})
			set(62 * time.Second) // past the web window of 60 s: the logout's own fence has ended
			return err
		}},
		{"expiry", func(p core.Presence, t2 string, set setFunc) error {
			set(62 * time.Second)
			return nil
		}},
	}
	for _, sup := range supersede {
		for _, end := range ends {
			t.Run(sup.name+", then "+end.name, func(t *testing.T) {
				clk := &manualClock{t: t0}
				e, mr := miniEngine(t, clk, core.Config{})
				m, err := core.NewModel(core.Config{Clock: clk.Now})
				if err != nil {
					t.Fatal(err)
				}
				for name, p := range map[string]core.Presence{"engine": e, "model": m} {
					set := func(d time.Duration) {
						clk.t = t0.Add(d)
						mr.SetTime(clk.t)
					}
					set(0)
					t1, t2, err := sup.run(p, set)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if err := end.run(p, t2, set); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					ack, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d1", Kind: core.KindWeb, Token: t1})
					if !errors.Is(err, core.ErrSessionReplaced) {
						t.Errorf("%s: heartbeat at t0+%v with a token superseded at t0+1s at the latest: token %q, err %v; want ErrSessionReplaced",
							name, clk.t.Sub(t0), ack.Token, err)
					}
				}
			})
		}
	}
}
