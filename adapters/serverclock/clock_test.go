package serverclock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/serverclock"
	"github.com/presencekit/presence/core"
)

// t0 is the client's clock at the start of every test.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeHost is the client's clock and a server whose clock runs ahead by
// ahead; each ping takes the next of rtts (the last one repeats), half of
// it each way.
type fakeHost struct {
	local time.Time
	ahead time.Duration
	rtts  []time.Duration
	err   error
	pings int
}

func (h *fakeHost) Now() time.Time { return h.local }

func (h *fakeHost) Ping(context.Context) (time.Time, error) {
	rtt := h.rtts[min(h.pings, len(h.rtts)-1)]
	h.pings++
	if h.err != nil {
		return time.Time{}, h.err
	}
	h.local = h.local.Add(rtt / 2)
	server := h.local.Add(h.ahead).Truncate(time.Millisecond) // TIME in ms, as ping.lua returns it
	h.local = h.local.Add(rtt - rtt/2)
	return server, nil
}

func newClock(t *testing.T, h *fakeHost, samples int) *serverclock.Clock {
	t.Helper()
	c, err := serverclock.New(serverclock.Config{Samples: samples, Local: h.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// within reports whether got is want give or take tol.
func within(got, want time.Time, tol time.Duration) bool {
	d := got.Sub(want)
	return d >= -tol && d <= tol
}

func TestSyncFollowsTheServer(t *testing.T) {
	steps := []struct {
		name   string
		ahead  time.Duration
		rtts   []time.Duration
		later  time.Duration // the client's clock moves on after the Sync
		rtt    time.Duration // the round trip of the reading kept
		offset time.Duration
	}{
		{"server an hour ahead", time.Hour, []time.Duration{2 * time.Millisecond}, 0, 2 * time.Millisecond, time.Hour},
		{"server behind", -90 * time.Second, []time.Duration{time.Millisecond}, 10 * time.Second, time.Millisecond, -90 * time.Second},
		{"the shortest round trip wins", 5 * time.Minute, []time.Duration{40 * time.Millisecond, 400 * time.Microsecond, 9 * time.Millisecond}, time.Minute, 400 * time.Microsecond, 5 * time.Minute},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			h := &fakeHost{local: t0, ahead: s.ahead, rtts: s.rtts}
			c := newClock(t, h, 3)
			if err := c.Sync(context.Background(), h); err != nil {
				t.Fatal(err)
			}
			if h.pings != 3 {
				t.Errorf("pinged %d times, want 3 (Samples)", h.pings)
			}
			offset, rtt, err := c.Offset()
			if err != nil || rtt != s.rtt {
				t.Errorf("Offset: rtt %v, err %v; want rtt %v", rtt, err, s.rtt)
			}
			// the server's millisecond truncation and half the round trip
			tol := time.Millisecond + s.rtt/2
			if d := offset - s.offset; d < -tol || d > tol {
				t.Errorf("offset %v, want %v ± %v", offset, s.offset, tol)
			}
			h.local = h.local.Add(s.later)
			if got, want := c.Now(), h.local.Add(s.ahead); !within(got, want, tol) {
				t.Errorf("Now() = %v, want %v ± %v", got, want, tol)
			}
		})
	}
}

func TestNowBeforeSyncIsTheClients(t *testing.T) {
	h := &fakeHost{local: t0, ahead: time.Hour, rtts: []time.Duration{time.Millisecond}}
	c := newClock(t, h, 1)
	if got := c.Now(); !got.Equal(t0) {
		t.Errorf("Now() before Sync = %v, want the client's %v", got, t0)
	}
	if _, _, err := c.Offset(); !errors.Is(err, serverclock.ErrNotSynced) {
		t.Errorf("Offset before Sync: %v, want ErrNotSynced", err)
	}
}

// TestNowNeverGoesBack: a reading that sets the estimate back (the server's
// clock was stepped back, or the earlier reading was late) does not make
// Now return an instant before one it returned.
func TestNowNeverGoesBack(t *testing.T) {
	h := &fakeHost{local: t0, ahead: 50 * time.Millisecond, rtts: []time.Duration{time.Millisecond}}
	c := newClock(t, h, 1)
	ctx := context.Background()
	if err := c.Sync(ctx, h); err != nil {
		t.Fatal(err)
	}
	before := c.Now()
	h.ahead = 0
	if err := c.Sync(ctx, h); err != nil {
		t.Fatal(err)
	}
	if got := c.Now(); got.Before(before) {
		t.Errorf("Now() went back from %v to %v", before, got)
	}
	h.local = h.local.Add(time.Second) // past the step: the new estimate again
	if got, want := c.Now(), h.local; !within(got, want, 2*time.Millisecond) {
		t.Errorf("a second later Now() = %v, want %v", got, want)
	}
}

func TestFailedSyncKeepsTheReading(t *testing.T) {
	h := &fakeHost{local: t0, ahead: time.Hour, rtts: []time.Duration{time.Millisecond}}
	c := newClock(t, h, 2)
	ctx := context.Background()
	if err := c.Sync(ctx, h); err != nil {
		t.Fatal(err)
	}
	want, _, _ := c.Offset()
	h.err, h.ahead = core.ErrUnavailable, 0
	if err := c.Sync(ctx, h); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Sync with the server down: %v, want it to wrap core.ErrUnavailable", err)
	}
	if got, _, _ := c.Offset(); got != want {
		t.Errorf("offset after a failed Sync %v, want the previous %v", got, want)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []serverclock.Config{{Every: -time.Second}, {Samples: -1}, {Samples: 101}} {
		var ie *core.InputError
		if _, err := serverclock.New(cfg); !errors.As(err, &ie) {
			t.Errorf("New(%+v): %v, want an *InputError", cfg, err)
		}
	}
}

// countingPinger answers with the client's clock and reports each ping.
type countingPinger struct{ pinged chan struct{} }

func (p countingPinger) Ping(context.Context) (time.Time, error) {
	select {
	case p.pinged <- struct{}{}:
	default:
	}
	return time.Now(), nil
}

func TestRunSyncsUntilItsContextEnds(t *testing.T) {
	c, err := serverclock.New(serverclock.Config{Every: time.Millisecond, Samples: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := countingPinger{pinged: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx, p, nil) }()
	<-p.pinged
	<-p.pinged
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if _, _, err := c.Offset(); err != nil {
		t.Errorf("Offset after Run synced: %v", err)
	}
}
