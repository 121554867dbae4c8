package batcher_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/batcher"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// gate is a Beater over a core.Model that records each batch's size and
// holds every call until the test lets it go.
type gate struct {
	model   *core.Model
	mu      sync.Mutex
	sizes   []int
	entered chan int // the size of each call, as it starts
	release chan struct{}
	fail    error
}

func newGate(t *testing.T) *gate {
	t.Helper()
	m, err := core.NewModel(core.Config{Clock: (fixedClock{}).Now})
	if err != nil {
		t.Fatal(err)
	}
	return &gate{model: m, entered: make(chan int, 100), release: make(chan struct{}, 100)}
}

func (g *gate) HeartbeatBatch(ctx context.Context, beats []core.Heartbeat) ([]core.Ack, error) {
	g.mu.Lock()
	g.sizes = append(g.sizes, len(beats))
	g.mu.Unlock()
	g.entered <- len(beats)
	<-g.release
	if g.fail != nil {
		return nil, g.fail
	}
	return opdo.Do[[]core.Ack](ctx, g.model, core.HeartbeatBatch(beats))
}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

func beat(user string) core.Heartbeat {
	return core.Heartbeat{User: user, Device: "web", Kind: core.KindWeb, Active: true}
}

// TestBeatsArrivingDuringACallMakeTheNextBatch holds the first call on
// the wire while ten more beats arrive: with one sender they must all go
// in the second call, and every caller gets its own beat's outcome.
func TestBeatsArrivingDuringACallMakeTheNextBatch(t *testing.T) {
	g := newGate(t)
	b, err := batcher.New(g, batcher.Config{Inflight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	type result struct {
		user string
		ack  core.Ack
		err  error
	}
	results := make(chan result, 11)
	send := func(user string) {
		ack, err := b.Heartbeat(ctx, beat(user))
		results <- result{user, ack, err}
	}
	go send("first")
	if n := <-g.entered; n != 1 {
		t.Fatalf("first call carried %d beats, want 1", n)
	}
	for i := range 10 {
		go send(fmt.Sprintf("u%d", i))
	}
	// the ten are queued once the sender, released, finds them waiting;
	// wait until all ten callers are blocked in Heartbeat
	waitQueued(t, b, 10)
	g.release <- struct{}{}
	if n := <-g.entered; n != 10 {
		t.Fatalf("second call carried %d beats, want 10", n)
	}
	g.release <- struct{}{}
	seen := map[string]bool{}
	for range 11 {
		r := <-results
		if r.err != nil || r.ack.Token == "" {
			t.Errorf("%s: ack %+v, err %v", r.user, r.ack, r.err)
		}
		seen[r.user] = true
	}
	if len(seen) != 11 {
		t.Errorf("%d distinct callers answered, want 11", len(seen))
	}
	st, err := opdo.Do[core.UserStatus](ctx, g.model, core.ReadStatus{User: "u7"})
	if err != nil || len(st.Devices) != 1 || st.Devices[0].ID != "web" {
		t.Errorf("u7 after its batch: %+v, %v", st, err)
	}
}

// waitQueued waits until n beats wait in b's queue.
func waitQueued(t *testing.T, b *batcher.Batcher, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for batcher.Queued(b) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d beats queued", batcher.Queued(b), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOutcomesGoToTheirCallers checks that a refusal reaches only the
// caller whose beat was refused, and a failed call reaches every caller
// of its batch.
func TestOutcomesGoToTheirCallers(t *testing.T) {
	g := newGate(t)
	b, err := batcher.New(g, batcher.Config{Inflight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	g.release <- struct{}{}
	ack, err := b.Heartbeat(ctx, beat("alice"))
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered
	good, bad := beat("alice"), beat("alice")
	good.Token, bad.Token = ack.Token, "superseded"
	errs := make(chan error, 2)
	for _, hb := range []core.Heartbeat{good, bad} {
		go func() {
			_, err := b.Heartbeat(ctx, hb)
			errs <- err
		}()
		if hb.Token == good.Token {
			<-g.entered // the good beat is on the wire; the bad one waits
		}
	}
	waitQueued(t, b, 1)
	g.release <- struct{}{}
	<-g.entered
	g.release <- struct{}{}
	got := []error{<-errs, <-errs}
	if (got[0] == nil) == (got[1] == nil) || !errors.Is(errors.Join(got...), core.ErrSessionReplaced) {
		t.Errorf("outcomes %v, want one nil and one ErrSessionReplaced", got)
	}

	down := errors.New("redis is down")
	g.fail = down
	for range 3 {
		g.release <- struct{}{}
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Heartbeat(ctx, beat(fmt.Sprint("v", i))); !errors.Is(err, down) {
				t.Errorf("beat in a failed call: %v, want %v", err, down)
			}
		}()
	}
	wg.Wait()
}

// TestCloseSendsWhatItWasGiven checks that Close waits for the beats
// already given, and that later beats are refused.
func TestCloseSendsWhatItWasGiven(t *testing.T) {
	g := newGate(t)
	b, err := batcher.New(g, batcher.Config{Inflight: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	errs := make(chan error, 3)
	send := func(user string) {
		_, err := b.Heartbeat(ctx, beat(user))
		errs <- err
	}
	go send("u0")
	<-g.entered
	go send("u1")
	go send("u2")
	waitQueued(t, b, 2)
	closed := make(chan error)
	go func() { closed <- b.Close() }()
	for range 2 {
		g.release <- struct{}{}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("beat given before Close: %v", err)
		}
	}
	if _, err := b.Heartbeat(ctx, beat("late")); !errors.Is(err, batcher.ErrClosed) {
		t.Errorf("beat after Close: %v, want ErrClosed", err)
	}
}

// TestCallerContext checks that a caller whose context ends stops waiting.
func TestCallerContext(t *testing.T) {
	g := newGate(t)
	b, err := batcher.New(g, batcher.Config{Inflight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		g.release <- struct{}{}
		b.Close()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := b.Heartbeat(ctx, beat("u"))
		done <- err
	}()
	<-g.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v, want context.Canceled", err)
	}
}

func TestConfigValidation(t *testing.T) {
	g := newGate(t)
	tests := []struct {
		name  string
		cfg   batcher.Config
		field string
	}{
		{"batch too large", batcher.Config{MaxBatch: core.MaxBatch + 1}, "Config.MaxBatch"},
		{"negative batch", batcher.Config{MaxBatch: -1}, "Config.MaxBatch"},
		{"negative inflight", batcher.Config{Inflight: -1}, "Config.Inflight"},
		{"too many inflight", batcher.Config{Inflight: 65}, "Config.Inflight"},
		{"negative linger", batcher.Config{Linger: -time.Second}, "Config.Linger"},
		{"negative timeout", batcher.Config{Timeout: -time.Second}, "Config.Timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := batcher.New(g, tt.cfg)
			var ie *core.InputError
			if !errors.As(err, &ie) || ie.Field != tt.field || !errors.Is(err, core.ErrInvalid) {
				t.Errorf("New: %v, want an InputError on %s", err, tt.field)
			}
		})
	}
	if _, err := batcher.New(nil, batcher.Config{}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("New(nil): %v, want ErrInvalid", err)
	}
}
