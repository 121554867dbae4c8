package reliability_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// commandCalls returns how many times the server ran a command, from INFO
// commandstats ("cmdstat_eval:calls=12,…").
func commandCalls(tb testing.TB, srv *redistest.Instance, name string) int64 {
	tb.Helper()
	info := fmt.Sprint(rig.Do(tb, srv, "INFO", "commandstats"))
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// TestScriptFlushWhileRunning flushes the server's script cache over and
// over while gateways send batched heartbeats and touches (pipelines of
// one script call per bucket), readers read statuses, counts and member
// lists, and sweepers sweep: the core's NOSCRIPT fallback sends the source
// and not a single call fails.
func TestScriptFlushWhileRunning(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng := rig.Engine(t, a.Open(t, srv.Addr), timedConfig("presence"))
			pop := newPopulation(eng, 64, 2, 4, 5*time.Second)
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var mu sync.Mutex
			var errs []error
			var calls atomic.Int64
			fail := func(what string, err error) {
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", what, err))
					mu.Unlock()
				}
				calls.Add(1)
			}
			loop := func(f func(ctx context.Context)) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						f(cctx)
						cancel()
					}
				}()
			}
			for i, g := range pop.gateways {
				loop(func(context.Context) { fail("gateway "+strconv.Itoa(i), g.tick().err) })
			}
			loop(func(ctx context.Context) { _, err := eng.Statuses(ctx, pop.users); fail("Statuses", err) })
			loop(func(ctx context.Context) {
				_, err := eng.Count(ctx, pop.video)
				fail("Count", err)
				_, err = eng.Members(ctx, pop.room, "", 100)
				fail("Members", err)
				_, err = eng.ActiveWithin(ctx, pop.video, beat)
				fail("ActiveWithin", err)
			})
			loop(func(ctx context.Context) {
				_, err := eng.SweepUsers(ctx)
				fail("SweepUsers", err)
				_, err = eng.SweepScopes(ctx)
				fail("SweepScopes", err)
			})
			loop(func(ctx context.Context) {
				u := "churn-" + strconv.FormatInt(calls.Load()%50, 10)
				r, err := eng.Login(ctx, core.Login{User: u, Device: "phone", Kind: core.KindAndroid})
				fail("Login", err)
				_, err = eng.SetManual(ctx, u, core.ManualDND, time.Second)
				fail("SetManual", err)
				_, err = eng.Logout(ctx, u, "phone", r.Token)
				fail("Logout", err)
			})
			evalBefore := commandCalls(t, srv, "eval")
			flushes := 0
			deadline := time.Now().Add(settle)
			for flushes < 100 || commandCalls(t, srv, "eval")-evalBefore < 50 {
				mode := "SYNC"
				if flushes%2 == 1 {
					mode = "ASYNC"
				}
				rig.Do(t, srv, "SCRIPT", "FLUSH", mode)
				flushes++
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			stop()
			wg.Wait()
			fallbacks := commandCalls(t, srv, "eval") - evalBefore
			if fallbacks == 0 {
				t.Fatalf("%d flushes and no EVAL fallback: the test did not exercise NOSCRIPT", flushes)
			}
			for _, err := range errs {
				t.Errorf("a call failed while scripts were flushed: %v", err)
			}
			for _, g := range pop.gateways {
				if r := g.tick(); r.err != nil {
					t.Fatalf("a round after the flushes: %v", r.err)
				}
			}
			ok, why := pop.present(eng)
			if !ok {
				t.Errorf("after the flushes: %s", why)
			}
			t.Logf("FIGURE script-flush adapter=%s flushes=%d calls=%d eval_fallbacks=%d errors=%d",
				a.Name, flushes, calls.Load(), fallbacks, len(errs))
		})
	}
}
