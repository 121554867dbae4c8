package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/sweeper"
	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// beat is the heartbeat interval I of the timed runs: short, so that a run
// of many intervals fits in a CI budget.
const beat = 300 * time.Millisecond

// timedConfig is the engine configuration of the timed runs: web devices
// heartbeat every beat; "room" counts exactly and "video" compactly, both
// over the device window, and video scopes are swept every beat.
func timedConfig(prefix string) core.Config {
	return core.Config{
		Prefix:    prefix,
		Intervals: map[core.Kind]time.Duration{core.KindWeb: beat},
		Classes: map[string]core.ScopeClass{
			"room":  {Layout: core.LayoutExact, Window: 2 * beat, SweepInterval: beat},
			"video": {Layout: core.LayoutCompact, Window: 2 * beat, SweepInterval: beat, Shards: 4},
		},
	}
}

// population is the users of a timed run, split among gateways.
type population struct {
	users    []string
	devices  int
	gateways []*gateway
	room     core.Scope
	video    core.Scope
}

func newPopulation(eng *core.Engine, users, devices, gateways int, timeout time.Duration) *population {
	p := &population{devices: devices, room: core.Scope{Class: "room", ID: "888"}, video: core.Scope{Class: "video", ID: "10086"}}
	for i := range users {
		p.users = append(p.users, "user-"+strconv.Itoa(i))
	}
	per := (users + gateways - 1) / gateways
	for g := range gateways {
		lo, hi := g*per, min((g+1)*per, users)
		p.gateways = append(p.gateways, newGateway(eng, "gw-"+strconv.Itoa(g), p.users[lo:hi], devices, []core.Scope{p.room, p.video}, timeout))
	}
	return p
}

// start runs every gateway until the returned stop is called; stop waits
// for them to return.
func (p *population) start(period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, g := range p.gateways {
		wg.Add(1)
		go func() { defer wg.Done(); g.run(ctx, period) }()
	}
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}

// present reports whether every device of every user is live, the exact
// count is everyone, and every user is listed in the compact scope.
func (p *population) present(eng *core.Engine) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	sts, err := eng.Statuses(ctx, p.users)
	if err != nil {
		return false, err.Error()
	}
	for _, st := range sts {
		if len(st.Devices) != p.devices || st.Status != core.StatusOnline {
			return false, fmt.Sprintf("%s is %v with %d devices", st.User, st.Status, len(st.Devices))
		}
	}
	if c, err := eng.Count(ctx, p.room); err != nil || c.N != int64(len(p.users)) || c.Stale {
		return false, fmt.Sprintf("room count %+v, %v", c, err)
	}
	page, err := eng.Members(ctx, p.video, "", core.MaxPage)
	if err != nil || len(page.Members) != len(p.users) {
		return false, fmt.Sprintf("video lists %d members, %v", len(page.Members), err)
	}
	return true, ""
}

// TestRedisKilledMidRun kills redis-server with SIGKILL while gateways
// heartbeat, a sweeper sweeps and readers count, keeps it dead for a few
// intervals, and restarts it empty. During the outage every failed call
// is retryable and returns by its deadline, and counts read before it are
// served marked stale (a count never read is a retryable error); after it,
// one successful round of heartbeats brings every device and member back,
// with no repair.
func TestRedisKilledMidRun(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) { killedMidRun(t, a) })
	}
}

func killedMidRun(t *testing.T, a rig.Adapter) {
	rig.CheckLeaks(t)
	srv := redistest.Server(t)
	eng := rig.Engine(t, a.Open(t, srv.Addr), timedConfig("presence"))
	// Each gateway call may take up to 2 s: on a loaded machine a round can
	// outlast the interval, which must not count as a failure.
	pop := newPopulation(eng, 40, 2, 4, 2*time.Second)

	stopGateways := pop.start(beat)
	defer stopGateways()
	sweepCtx, stopSweeper := context.WithCancel(context.Background())
	sweepDone := make(chan struct{})
	var sweepMu sync.Mutex
	var sweepErrs []error
	go func() {
		defer close(sweepDone)
		sweeper.Run(sweepCtx, eng, sweeper.Options{UserInterval: beat / 2, ScopeInterval: beat / 2,
			OnReport: func(kind string, r core.SweepReport, err error) {
				if err != nil && sweepCtx.Err() == nil {
					sweepMu.Lock()
					sweepErrs = append(sweepErrs, err)
					sweepMu.Unlock()
				}
			}})
	}()
	defer func() { stopSweeper(); <-sweepDone }()

	warm := poll(t, settle, "everyone present before the outage", func() (bool, string) { return pop.present(eng) })
	t.Logf("%s: all %d users present %v after start", a.Name, len(pop.users), warm.Round(time.Millisecond))

	// A count read before the outage is remembered as the last good one.
	ctx := bounded(t, settle)
	for _, sc := range []core.Scope{pop.room, pop.video} {
		if _, err := eng.Count(ctx, sc); err != nil {
			t.Fatalf("count %v before the outage: %v", sc, err)
		}
	}
	lastRoom, _ := eng.Count(ctx, pop.room)

	srv.Kill()
	killedAt := time.Now()
	poll(t, settle, "every gateway failing", func() (bool, string) {
		for i, g := range pop.gateways {
			if g.failedAfter(killedAt) < 1 {
				return false, fmt.Sprintf("gateway %d has %d failed rounds", i, g.failedAfter(killedAt))
			}
		}
		return true, ""
	})

	// Reads during the outage, each bounded by its own deadline.
	outageCall := func(what string, f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), beat)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		if d := time.Since(start); d > beat+overrunSlack {
			t.Errorf("%s during the outage returned after %v, past its %v deadline", what, d, beat)
		}
		return err
	}
	var stale core.Count
	err := outageCall("Count(room)", func(ctx context.Context) (err error) { stale, err = eng.Count(ctx, pop.room); return })
	if err != nil || !stale.Stale || stale.N != lastRoom.N {
		t.Errorf("room count during the outage: %+v, %v; want the last good %d marked stale", stale, err, lastRoom.N)
	}
	var staleVideo core.Count
	err = outageCall("Count(video)", func(ctx context.Context) (err error) { staleVideo, err = eng.Count(ctx, pop.video); return })
	if err != nil || !staleVideo.Stale {
		t.Errorf("video count during the outage: %+v, %v; want the last good one marked stale", staleVideo, err)
	}
	err = outageCall("Count(cold)", func(ctx context.Context) error {
		_, err := eng.Count(ctx, core.Scope{Class: "room", ID: "never-read"})
		return err
	})
	if !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("count of a scope never read during the outage: %v, want a retryable error", err)
	}
	err = outageCall("Status", func(ctx context.Context) error { _, err := eng.Status(ctx, pop.users[0]); return err })
	if !errors.Is(err, core.ErrUnavailable) || storeError(err) == nil {
		t.Errorf("status during the outage: %v, want a retryable *core.StoreError", err)
	}
	err = outageCall("Login", func(ctx context.Context) error {
		_, err := eng.Login(ctx, core.Login{User: "late", Device: "d"})
		return err
	})
	if !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("login during the outage: %v, want a retryable error", err)
	}

	srv.Restart()
	restartedAt := time.Now()
	outage := restartedAt.Sub(killedAt)
	// One successful round of every gateway after the restart is enough:
	// look right after it, without waiting further.
	poll(t, settle, "a successful round of every gateway after the restart", func() (bool, string) {
		for i, g := range pop.gateways {
			if ok, _ := g.okAfter(restartedAt); !ok {
				return false, fmt.Sprintf("gateway %d has no successful round yet", i)
			}
		}
		return true, ""
	})
	recovered := poll(t, settle, "everyone present after the restart", func() (bool, string) { return pop.present(eng) })
	recovery := time.Since(restartedAt)
	if recovered > 2*beat {
		// Not a failure (timing is a figure here), but worth seeing.
		t.Logf("%s: presence lagged the first successful rounds by %v", a.Name, recovered)
	}
	// The compact count converges through the sweep that follows.
	videoBack := poll(t, settle, "video count back", func() (bool, string) {
		c, err := eng.Count(bounded(t, time.Second), pop.video)
		return err == nil && !c.Stale && c.N == int64(len(pop.users)), fmt.Sprintf("%+v %v", c, err)
	})
	// And the run goes on: two rounds in a row succeed on every gateway.
	after := time.Now()
	poll(t, settle, "two more clean rounds", func() (bool, string) {
		for i, g := range pop.gateways {
			streak := 0
			for _, r := range g.snapshot() {
				if r.start.Before(after) {
					continue
				}
				if r.err != nil {
					streak = 0
				} else {
					streak++
				}
			}
			if streak < 2 {
				return false, fmt.Sprintf("gateway %d has %d clean rounds in a row after recovery", i, streak)
			}
		}
		return true, ""
	})
	stopGateways()
	stopSweeper()
	<-sweepDone
	failedAfter := 0
	for i, g := range pop.gateways {
		g.checkErrors(t, "gateway "+strconv.Itoa(i))
		failedAfter += g.failedAfter(after)
	}
	sweepMu.Lock()
	for _, err := range sweepErrs {
		if !errors.Is(err, core.ErrUnavailable) {
			t.Errorf("a sweep failed with %v, which is not retryable", err)
		}
	}
	sweepMu.Unlock()
	t.Logf("FIGURE outage adapter=%s outage=%v recovery=%v video_count_back=%v rounds_failed_after_recovery=%d (beat %v, %d users × %d devices)",
		a.Name, outage.Round(time.Millisecond), recovery.Round(time.Millisecond), (recovery + videoBack).Round(time.Millisecond), failedAfter, beat, len(pop.users), pop.devices)
}

// TestRestartUnderExclusivePolicy: under the exclusive login policies a
// device must log in before it heartbeats, and a server restarted empty
// has forgotten every session, so the first heartbeat after the restart is
// refused with ErrNoSession, which tells the gateway to log the device in
// again; the login succeeds and the device is back, kicking nobody. (Under
// PolicyMulti, the default, the heartbeat alone brings it back.)
func TestRestartUnderExclusivePolicy(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng := rig.Engine(t, a.Open(t, srv.Addr), core.Config{Policy: core.PolicyExclusive})
			ctx := bounded(t, settle)
			r, err := eng.Login(ctx, core.Login{User: "u", Device: "phone", Kind: core.KindIOS, Gateway: "gw"})
			if err != nil {
				t.Fatal(err)
			}
			srv.Restart()
			var hbErr error
			poll(t, settle, "a heartbeat answered after the restart", func() (bool, string) {
				_, hbErr = eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "phone", Token: r.Token})
				return !errors.Is(hbErr, core.ErrUnavailable), fmt.Sprint(hbErr)
			})
			if !errors.Is(hbErr, core.ErrNoSession) {
				t.Fatalf("heartbeat after the restart: %v, want ErrNoSession", hbErr)
			}
			// A client may still hold connections to the dead server: their
			// failures are retryable, and the gateway retries.
			var again core.LoginResult
			untilDone(t, func() (err error) {
				again, err = eng.Login(ctx, core.Login{User: "u", Device: "phone", Kind: core.KindIOS, Gateway: "gw"})
				return err
			})
			if len(again.Kicked) != 0 {
				t.Fatalf("login after the restart: %+v; want a fresh session, nobody kicked", again)
			}
			untilDone(t, func() error {
				_, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "phone", Token: again.Token})
				return err
			})
			var st core.UserStatus
			untilDone(t, func() (err error) { st, err = eng.Status(ctx, "u"); return err })
			if len(st.Devices) != 1 {
				t.Fatalf("after the new login: %+v", st)
			}
		})
	}
}
