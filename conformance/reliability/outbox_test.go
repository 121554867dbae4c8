package reliability_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/conformance/reliability/faultproxy"
	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// The outbox (docs/design.md §7): a change or kick a script decides is
// recorded in its bucket's outbox in the same step, delivered at least
// once (by its engine after the reply, again by a sweep for what stayed
// unacknowledged), and read once (readers drop repeats by outbox ID).
// Each test below breaks delivery a different way and shows a subscriber
// still gets the change exactly once.

// outboxConfig publishes changes at once, on a clock the test moves.
func outboxConfig(clk *rig.Clock) core.Config {
	return core.Config{Clock: clk.Now, CoalesceWindow: -1, LeaveDelay: -1}
}

// subscriber is a Feed on a direct connection to srv (no fault proxy).
func subscriber(t *testing.T, srv *redistest.Instance, ctx context.Context) *core.Feed {
	t.Helper()
	eng := rig.Engine(t, rig.OpenGoredis(t, srv.Addr), core.Config{})
	feed, err := eng.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { feed.Close() })
	return feed
}

// feedChangesOf reads the feed until the sentinel user's change arrives and
// returns the changes of user seen before it. The sentinel is published
// after everything the test did, so the feed has delivered all of that
// by then (messages of one channel arrive in order).
func feedChangesOf(t *testing.T, ctx context.Context, feed *core.Feed, eng *core.Engine, user string) []core.Change {
	t.Helper()
	const sentinel = "sentinel-user"
	if _, err := eng.Login(ctx, core.Login{User: sentinel, Device: "web", Kind: core.KindWeb}); err != nil {
		t.Fatal(err)
	}
	var got []core.Change
	for {
		ev, err := feed.Next(ctx)
		if err != nil {
			t.Fatalf("feed: %v (changes of %s so far: %v)", err, user, got)
		}
		switch {
		case ev.Change == nil:
		case ev.Change.User == sentinel:
			return got
		case ev.Change.User == user:
			got = append(got, *ev.Change)
		}
	}
}

// TestLostReplyChangeDeliveredOnce: the reply of the heartbeat that
// publishes a change (the steady beat's call, which decided it on the full
// path) is lost after the script ran. go-redis resends the
// script, redigo and rueidis return an error and the caller retries; the
// second run finds nothing left to change, so the engine publishes
// nothing. The outbox still holds the change: the next user sweep past
// core.RedeliverAfter delivers it, and the subscriber sees it once.
func TestLostReplyChangeDeliveredOnce(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			srv := redistest.Server(t)
			loadScripts(t, srv)
			p := faultproxy.Start(t, srv.Addr)
			clk := rig.NewClock(rig.T0)
			eng := rig.Engine(t, a.Open(t, p.Addr()), outboxConfig(clk))
			ctx := bounded(t, settle)
			feed := subscriber(t, srv, ctx)
			if _, err := eng.Status(ctx, "warm"); err != nil { // the client's connection, first
				t.Fatal(err)
			}
			p.LoseReplyTo([]byte(script(t, "beat").SHA))
			var returned []core.Change
			untilDone(t, func() error {
				ack, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Active: true})
				returned = append(returned, ack.Changes...)
				return err
			})
			if p.Lost() == 0 {
				t.Fatal("the proxy lost no reply: the test did not test")
			}
			t.Logf("the heartbeat returned %v after its reply was lost", returned)
			clk.Add(core.RedeliverAfter + time.Second)
			for range 2 { // the second sweep finds the change acknowledged
				if _, err := eng.SweepUsers(ctx); err != nil {
					t.Fatal(err)
				}
			}
			got := feedChangesOf(t, ctx, feed, eng, "u")
			if len(got) != 1 || got[0].To != core.StatusOnline {
				t.Fatalf("the subscriber saw %v, want the change to ONLINE once", got)
			}
		})
	}
}

// crashEnv names the environment variable that makes this test binary act
// as the engine process TestCrashBeforePublishChangeDeliveredOnce kills.
const crashEnv = "PRESENCE_OUTBOX_CRASH_ADDR"

// crashingPublisher ends the process the moment the engine delivers
// (lua/outbox_ack.lua publishes and acknowledges): after the script
// decided the change, before any message is out.
type crashingPublisher struct{ core.Store }

func (p crashingPublisher) Eval(ctx context.Context, calls []core.Call) []core.Result {
	for _, c := range calls {
		if isDelivery(c) {
			os.Exit(3)
		}
	}
	return p.Store.Eval(ctx, calls)
}

// TestMain runs the crashing engine when the test starts this binary as
// that process.
func TestMain(m *testing.M) {
	if addr := os.Getenv(crashEnv); addr != "" {
		os.Exit(crashingEngine(addr))
	}
	os.Exit(m.Run())
}

// crashingEngine logs a user in on the Redis at addr and dies before
// publishing its change; it returns only if it did not die.
func crashingEngine(addr string) int {
	client := goredislib.NewClient(&goredislib.Options{Addr: addr})
	defer client.Close()
	store := crashingPublisher{Store: goredis.New(client)}
	eng, err := core.New(store, outboxConfig(rig.NewClock(rig.T0)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, err = eng.Login(context.Background(), core.Login{User: "u", Device: "web", Kind: core.KindWeb})
	fmt.Fprintln(os.Stderr, "the engine survived its publish:", err)
	return 1
}

// TestCrashBeforePublishChangeDeliveredOnce kills the engine process
// after the login script ran and before its change was published: the
// next sweep, by another process, delivers it.
func TestCrashBeforePublishChangeDeliveredOnce(t *testing.T) {
	srv := redistest.Server(t)
	ctx := bounded(t, settle)
	feed := subscriber(t, srv, ctx)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+srv.Addr)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("the engine process ended with %v, want exit status 3 from its publish:\n%s", err, out)
	}
	clk := rig.NewClock(rig.T0.Add(core.RedeliverAfter + time.Second))
	eng := rig.Engine(t, rig.OpenGoredis(t, srv.Addr), outboxConfig(clk))
	st, err := eng.Status(ctx, "u")
	if err != nil || st.Status != core.StatusOnline {
		t.Fatalf("after the crash u is %v (%v), want ONLINE: the script did not run", st.Status, err)
	}
	if _, err := eng.SweepUsers(ctx); err != nil {
		t.Fatal(err)
	}
	got := feedChangesOf(t, ctx, feed, eng, "u")
	if len(got) != 1 || got[0].To != core.StatusOnline {
		t.Fatalf("the subscriber saw %v, want the change to ONLINE once", got)
	}
}

// twicePublisher delivers every message twice: it sends each delivering
// call (lua/outbox_ack.lua) again, which publishes the messages again and
// finds their events already acknowledged.
type twicePublisher struct{ core.Store }

func (p twicePublisher) Eval(ctx context.Context, calls []core.Call) []core.Result {
	res := p.Store.Eval(ctx, calls)
	var again []core.Call
	for _, c := range calls {
		if isDelivery(c) {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		p.Store.Eval(ctx, again)
	}
	return res
}

// TestRepeatedDeliveryReadOnce: every message is published twice, and
// the change log gets a second copy from a sweep; a Feed returns each
// event once, and the log's copies share one EventID.
func TestRepeatedDeliveryReadOnce(t *testing.T) {
	srv := redistest.Server(t)
	ctx := bounded(t, settle)
	feed := subscriber(t, srv, ctx)
	inner := rig.OpenGoredis(t, srv.Addr)
	clk := rig.NewClock(rig.T0)
	cfg := outboxConfig(clk)
	cfg.ChangeLog = 100
	eng := rig.Engine(t, twicePublisher{Store: inner}, cfg)
	if _, err := eng.Login(ctx, core.Login{User: "u", Device: "web", Kind: core.KindWeb}); err != nil {
		t.Fatal(err)
	}
	got := feedChangesOf(t, ctx, feed, eng, "u")
	if len(got) != 1 || got[0].To != core.StatusOnline {
		t.Fatalf("the subscriber saw %v, want the change to ONLINE once", got)
	}
	entries, _, err := eng.ChangeLogAfter(ctx, "", 100)
	if err != nil || len(entries) == 0 || entries[0].EventID == "" {
		t.Fatalf("change log %+v %v: want entries with their event IDs", entries, err)
	}
}
