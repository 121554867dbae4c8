package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
)

// Bounds of the waits of these tests. They are far above what any step
// needs on a loaded machine; they exist so that a hang fails the test
// instead of blocking the run.
const (
	// settle bounds a wait for a state the system reaches by itself.
	settle = 20 * time.Second
	// overrunSlack is how long past its deadline a call may still be
	// returning (scheduling on a loaded 2-core machine) before it counts
	// as hanging.
	overrunSlack = 3 * time.Second
)

// poll calls cond every 10 ms until it reports true, and fails the test if
// it does not within d. It returns how long it waited.
func poll(tb testing.TB, d time.Duration, what string, cond func() (bool, string)) time.Duration {
	tb.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not reached within %v: %s", what, d, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bounded returns a context that ends after d.
func bounded(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// round is one tick of a gateway: a batch of heartbeats and of touches.
type round struct {
	start, end time.Time
	err        error
}

// gateway heartbeats a fixed set of devices and touches their users into
// scopes, one batched round per tick, as a gateway process merging the
// messages of its connections does. It keeps the session token of each
// device and sends it with every heartbeat.
type gateway struct {
	eng     *core.Engine
	beats   []core.Heartbeat
	touches []core.ScopeTouch
	timeout time.Duration

	mu       sync.Mutex
	rounds   []round
	overrun  time.Duration // the most a call returned past its deadline
	refusals []error       // per-beat refusals (Ack.Err): none expected
}

// newGateway returns a gateway for users, each with devices web devices
// named d0, d1, …, touching every scope.
func newGateway(eng *core.Engine, name string, users []string, devices int, scopes []core.Scope, timeout time.Duration) *gateway {
	g := &gateway{eng: eng, timeout: timeout}
	for _, u := range users {
		for d := range devices {
			g.beats = append(g.beats, core.Heartbeat{User: u, Device: "d" + strconv.Itoa(d), Kind: core.KindWeb, Gateway: name, Active: true})
		}
		for _, sc := range scopes {
			g.touches = append(g.touches, core.ScopeTouch{Scope: sc, Member: u})
		}
	}
	return g
}

// tick runs one round, each call bounded by the gateway's timeout.
func (g *gateway) tick() round {
	r := round{start: time.Now()}
	r.err = g.call(func(ctx context.Context) error {
		acks, err := g.eng.HeartbeatBatch(ctx, g.beats)
		if err != nil {
			return err
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		for i, a := range acks {
			if a.Err != nil {
				g.refusals = append(g.refusals, fmt.Errorf("%s/%s: %w", g.beats[i].User, g.beats[i].Device, a.Err))
				continue
			}
			g.beats[i].Token = a.Token
		}
		return nil
	})
	if r.err == nil && len(g.touches) > 0 {
		r.err = g.call(func(ctx context.Context) error { return g.eng.TouchBatch(ctx, g.touches) })
	}
	r.end = time.Now()
	g.mu.Lock()
	g.rounds = append(g.rounds, r)
	g.mu.Unlock()
	return r
}

// call runs f with a deadline and records how far past it f returned.
func (g *gateway) call(f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	if over := time.Since(start) - g.timeout; over > 0 {
		g.mu.Lock()
		g.overrun = max(g.overrun, over)
		g.mu.Unlock()
	}
	return err
}

// run ticks every period until ctx ends.
func (g *gateway) run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		g.tick()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// snapshot returns the rounds so far.
func (g *gateway) snapshot() []round {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]round(nil), g.rounds...)
}

// okAfter reports whether a round that started at or after t succeeded,
// and when the first such round ended.
func (g *gateway) okAfter(t time.Time) (bool, time.Time) {
	for _, r := range g.snapshot() {
		if r.err == nil && !r.start.Before(t) {
			return true, r.end
		}
	}
	return false, time.Time{}
}

// failedAfter counts the failed rounds that started at or after t.
func (g *gateway) failedAfter(t time.Time) int {
	n := 0
	for _, r := range g.snapshot() {
		if r.err != nil && !r.start.Before(t) {
			n++
		}
	}
	return n
}

// checkErrors fails the test for any error that is not retryable, any
// refused heartbeat, and any call that returned more than overrunSlack
// past its deadline.
func (g *gateway) checkErrors(tb testing.TB, name string) {
	tb.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.rounds {
		if r.err != nil && !errors.Is(r.err, core.ErrUnavailable) {
			tb.Errorf("%s: a round failed with %v, which is not retryable (errors.Is(err, core.ErrUnavailable) is false)", name, r.err)
		}
	}
	for _, err := range g.refusals {
		tb.Errorf("%s: a heartbeat was refused: %v", name, err)
	}
	if g.overrun > overrunSlack {
		tb.Errorf("%s: a call returned %v past its %v deadline", name, g.overrun, g.timeout)
	}
}

// storeError returns err's *core.StoreError, or nil.
func storeError(err error) *core.StoreError {
	var se *core.StoreError
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// untilDone retries f while it fails retryably, as a caller does.
func untilDone(t *testing.T, f func() error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return
		}
		if !errors.Is(err, core.ErrUnavailable) || attempt > 5 {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
}
