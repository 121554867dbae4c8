package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/internal/redistest"
)

// script returns the engine's script named name.
func script(tb testing.TB, name string) luascripts.Script {
	tb.Helper()
	s, ok := luascripts.Named(name)
	if !ok {
		tb.Fatalf("no script %q", name)
	}
	return s
}

// loadScripts loads every script of the engine, so that no call in the
// test meets NOSCRIPT (which would add a second round trip).
func loadScripts(tb testing.TB, srv *redistest.Instance) {
	tb.Helper()
	for _, s := range luascripts.All() {
		rig.Do(tb, srv, "SCRIPT", "LOAD", s.Source())
	}
}

// stallStore holds the n-th batch of calls to one script until the test
// releases it, as a sweeper paused by the scheduler, the garbage
// collector or the network would be held: with a nil release the batch
// then goes on to Redis, with an error it fails.
type stallStore struct {
	core.Store
	sha, source string

	mu      sync.Mutex
	seen    int
	at      int
	stalled chan struct{}
	release chan error
}

// newStallStore holds the at-th batch that calls sc; a test that ends
// early releases it with an error.
func newStallStore(tb testing.TB, s core.Store, sc luascripts.Script, at int) *stallStore {
	st := &stallStore{Store: s, sha: sc.SHA, source: sc.Source(), at: at, stalled: make(chan struct{}), release: make(chan error, 1)}
	tb.Cleanup(func() {
		select {
		case st.release <- errors.New("test over"):
		default:
		}
	})
	return st
}

func (s *stallStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	match := false
	for _, c := range calls {
		if c.SHA == s.sha || c.Source == s.source {
			match = true
		}
	}
	if match {
		s.mu.Lock()
		s.seen++
		hold := s.seen == s.at
		s.mu.Unlock()
		if hold {
			close(s.stalled)
			if err := <-s.release; err != nil {
				out := make([]core.Result, len(calls))
				for i := range out {
					out[i].Err = err
				}
				return out
			}
		}
	}
	return s.Store.Eval(ctx, calls)
}

// waitStalled waits until the store holds its batch.
func (s *stallStore) waitStalled(tb testing.TB) {
	tb.Helper()
	select {
	case <-s.stalled:
	case <-time.After(settle):
		tb.Fatal("the sweeper never reached its stall")
	}
}

// lockConfig makes every user share one bucket, sweeps settle two users a
// step, the lock lives 300 ms of real time, and changes publish at once.
// Each engine draws its tokens from its own seed.
func lockConfig(clk func() time.Time, seed uint64) core.Config {
	return core.Config{Clock: clk, UserBuckets: 1, SweepBatch: 2, LockLease: 300 * time.Millisecond,
		LeaveDelay: -1, CoalesceWindow: -1, Rand: &seqRand{n: seed << 32}}
}

// TestStaleSweeperCannotReleaseLock runs two sweepers over one bucket. The
// first takes the bucket's lock, settles a step, and stalls past the
// lock's lease; the second takes the lock and stalls in turn. When the
// first resumes it finds the lock held and stops, and neither its next
// step nor its unlock (after a failed step) can release the second's lock.
// Once the second finishes, every expired user is OFFLINE, announced
// exactly once.
func TestStaleSweeperCannotReleaseLock(t *testing.T) {
	for _, a := range rig.Adapters() {
		for _, fails := range []bool{false, true} {
			name := a.Name + "/resumes"
			if fails {
				name = a.Name + "/fails-and-unlocks"
			}
			t.Run(name, func(t *testing.T) {
				rig.CheckLeaks(t)
				srv := redistest.Server(t)
				loadScripts(t, srv)
				clk := rig.NewClock(rig.T0)
				sweep := script(t, "sweep_users")
				stale := newStallStore(t, a.Open(t, srv.Addr), sweep, 2)
				fresh := newStallStore(t, a.Open(t, srv.Addr), sweep, 2)
				engStale := rig.Engine(t, stale, lockConfig(clk.Now, 1))
				// Only the first sweeper's lease must run out; the second's lasts
				// the whole case, so that a slow machine cannot let it lapse
				// between the checks below.
				freshCfg := lockConfig(clk.Now, 2)
				freshCfg.LockLease = settle
				engFresh := rig.Engine(t, fresh, freshCfg)
				engFresh2 := rig.Engine(t, a.Open(t, srv.Addr), lockConfig(clk.Now, 3))
				ctx := bounded(t, settle)
				const users = 10
				for i := range users {
					// metadata too long for a page: each user has its own entry
					// in the due index, so that a step settles two of them
					hb := core.Heartbeat{User: "u" + strconv.Itoa(i), Device: "web", Kind: core.KindWeb, Active: true,
						Meta: map[string]string{"note": strings.Repeat("m", 64)}}
					if _, err := engFresh2.Heartbeat(ctx, hb); err != nil {
						t.Fatal(err)
					}
				}
				clk.Add(2 * time.Minute) // everyone's window has passed
				lockKey := "presence:{u0}:lock"

				type result struct {
					r   core.SweepReport
					err error
				}
				staleDone := make(chan result, 1)
				go func() { r, err := engStale.SweepUsers(ctx); staleDone <- result{r, err} }()
				stale.waitStalled(t)
				staleToken := fmt.Sprint(rig.Do(t, srv, "GET", lockKey))
				if staleToken == "<nil>" {
					t.Fatal("the first sweeper holds no lock after its first step")
				}
				poll(t, settle, "the stalled sweeper's lease running out", func() (bool, string) {
					return rig.PTTL(t, srv, lockKey) == -2, "the lock is still there"
				})

				freshDone := make(chan result, 1)
				go func() { r, err := engFresh.SweepUsers(ctx); freshDone <- result{r, err} }()
				fresh.waitStalled(t)
				freshToken := fmt.Sprint(rig.Do(t, srv, "GET", lockKey))
				if freshToken == "<nil>" || freshToken == staleToken {
					t.Fatalf("the second sweeper's lock: %q (the first's was %q)", freshToken, staleToken)
				}

				// The first sweeper resumes, or its step fails and it unlocks.
				if fails {
					stale.release <- fmt.Errorf("stalled: %w", core.ErrUnavailable)
				} else {
					stale.release <- nil
				}
				var rs result
				select {
				case rs = <-staleDone:
				case <-time.After(settle):
					t.Fatal("the stale sweeper did not return")
				}
				if fails && !errors.Is(rs.err, core.ErrUnavailable) {
					t.Fatalf("the stale sweeper's failed step: %v", rs.err)
				}
				if !fails && (rs.err != nil || rs.r.Held != 1) {
					t.Fatalf("the stale sweeper after its lease: %+v, %v; want the bucket found held", rs.r, rs.err)
				}
				if got := fmt.Sprint(rig.Do(t, srv, "GET", lockKey)); got != freshToken {
					t.Fatalf("after the stale sweeper returned the lock is %q, want the second sweeper's %q", got, freshToken)
				}
				// Nor can the stale token release it directly.
				unlock := script(t, "unlock")
				if n := rig.Do(t, srv, "EVAL", unlock.Source(), "1", lockKey, staleToken); n != int64(0) {
					t.Fatalf("unlock with the stale token returned %v, want 0", n)
				}
				if got := fmt.Sprint(rig.Do(t, srv, "GET", lockKey)); got != freshToken {
					t.Fatalf("after an unlock with the stale token the lock is %q, want %q", got, freshToken)
				}

				fresh.release <- nil
				var rf result
				select {
				case rf = <-freshDone:
				case <-time.After(settle):
					t.Fatal("the second sweeper did not return")
				}
				if rf.err != nil {
					t.Fatal(rf.err)
				}
				// Everyone is OFFLINE, announced exactly once between them.
				offline := map[string]int{}
				for _, c := range append(rs.r.Changes, rf.r.Changes...) {
					if c.To == core.StatusOffline {
						offline[c.User]++
					}
				}
				for i := range users {
					u := "u" + strconv.Itoa(i)
					if offline[u] != 1 {
						t.Errorf("%s announced OFFLINE %d times", u, offline[u])
					}
					if st, err := engFresh2.Status(ctx, u); err != nil || st.Status != core.StatusOffline || len(st.Devices) != 0 {
						t.Errorf("%s after the sweeps: %+v, %v", u, st, err)
					}
				}
				if n := rig.Do(t, srv, "ZCARD", "presence:{u0}:due"); n != int64(0) {
					t.Errorf("the due index still holds %v users", n)
				}
				if n := rig.Do(t, srv, "EXISTS", lockKey); n != int64(0) {
					t.Errorf("the lock outlived the last sweep")
				}
			})
		}
	}
}

// TestSweepersRaceHeartbeats runs two sweepers at once, round after round,
// while live users heartbeat and leavers stop one by one: no live user is
// ever removed or announced OFFLINE, every leaver is announced OFFLINE
// exactly once, and the due index ends holding the live users' pages only.
func TestSweepersRaceHeartbeats(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			clk := rig.NewClock(rig.T0)
			seed := uint64(0)
			cfg := func() core.Config {
				seed++
				c := lockConfig(clk.Now, seed)
				c.UserBuckets, c.LockLease = 4, 50*time.Millisecond
				return c
			}
			engA := rig.Engine(t, a.Open(t, srv.Addr), cfg())
			engB := rig.Engine(t, a.Open(t, srv.Addr), cfg())
			gw := rig.Engine(t, a.Open(t, srv.Addr), cfg())
			const live, leavers, rounds = 30, 20, 24
			var liveUsers, leaverUsers []string
			for i := range live {
				liveUsers = append(liveUsers, "live-"+strconv.Itoa(i))
			}
			for i := range leavers {
				leaverUsers = append(leaverUsers, "leaver-"+strconv.Itoa(i))
			}
			ctx := bounded(t, 2*settle)
			var mu sync.Mutex
			var changes []core.Change
			var errs []error
			for r := range rounds {
				clk.Add(20 * time.Second) // web window: 60 s
				// Leaver i stops after round i.
				var beats []core.Heartbeat
				for _, u := range liveUsers {
					beats = append(beats, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb, Active: true})
				}
				for i, u := range leaverUsers {
					if r <= i {
						beats = append(beats, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb, Active: true})
					}
				}
				var wg sync.WaitGroup
				for _, e := range []*core.Engine{engA, engB} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 3 {
							rep, err := e.SweepUsers(ctx)
							mu.Lock()
							changes = append(changes, rep.Changes...)
							if err != nil {
								errs = append(errs, err)
							}
							mu.Unlock()
						}
					}()
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < len(beats); i += 7 {
						acks, err := gw.HeartbeatBatch(ctx, beats[i:min(i+7, len(beats))])
						mu.Lock()
						if err != nil {
							errs = append(errs, err)
						}
						for _, a := range acks {
							if a.Err != nil {
								errs = append(errs, a.Err)
							}
						}
						mu.Unlock()
					}
				}()
				wg.Wait()
				for _, err := range errs {
					t.Fatalf("round %d: %v", r, err)
				}
				sts, err := gw.Statuses(ctx, liveUsers)
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range sts {
					if st.Status != core.StatusOnline || len(st.Devices) != 1 {
						t.Fatalf("round %d: live user %s is %v with %d devices", r, st.User, st.Status, len(st.Devices))
					}
				}
			}
			// A last pass after every leaver's window.
			clk.Add(2 * time.Minute)
			for _, u := range liveUsers {
				if _, err := gw.Heartbeat(ctx, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb}); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range []*core.Engine{engA, engB} {
				rep, err := e.SweepUsers(ctx)
				if err != nil {
					t.Fatal(err)
				}
				changes = append(changes, rep.Changes...)
			}
			offline := map[string]int{}
			for _, c := range changes {
				if c.To == core.StatusOffline {
					offline[c.User]++
				}
			}
			for _, u := range liveUsers {
				if offline[u] != 0 {
					t.Errorf("live user %s was announced OFFLINE %d times", u, offline[u])
				}
			}
			for _, u := range leaverUsers {
				if offline[u] != 1 {
					t.Errorf("leaver %s was announced OFFLINE %d times, want once", u, offline[u])
				}
			}
			// The due indexes hold the pages with users, and nothing else
			// (lua/recordlib.lua): the live users' pages stay due, and the
			// leavers left no entry behind.
			for b := range 4 {
				base := "presence:{u" + strconv.Itoa(b) + "}:"
				members, _ := rig.Do(t, srv, "ZRANGE", base+"due", "0", "-1").([]any)
				indexed := map[string]bool{}
				for _, m := range members {
					page, ok := strings.CutPrefix(fmt.Sprint(m), "\x01")
					if !ok {
						t.Errorf("bucket %d's due index holds user %q, want pages only", b, m)
					}
					indexed[page] = true
					if n, _ := rig.Do(t, srv, "HLEN", base+"p:"+page).(int64); n == 0 {
						t.Errorf("bucket %d's due index holds page %s, which holds no user", b, page)
					}
				}
				for _, k := range rig.Keys(t, srv) {
					if page, ok := strings.CutPrefix(k, base+"p:"); ok && !indexed[page] {
						t.Errorf("page %s holds users but is not in the due index", k)
					}
				}
			}
		})
	}
}
