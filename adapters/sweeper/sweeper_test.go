package sweeper_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/sweeper"
	"github.com/presencekit/presence/core"
)

type countingSweeper struct {
	mu            sync.Mutex
	users, scopes int
	failUsers     bool
	enough        chan struct{}
	closeOnce     sync.Once
}

func (c *countingSweeper) SweepUsers(context.Context) (core.SweepReport, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users++
	c.check()
	if c.failUsers {
		return core.SweepReport{}, errors.New("boom")
	}
	return core.SweepReport{Visited: 1}, nil
}

func (c *countingSweeper) SweepScopes(context.Context) (core.SweepReport, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scopes++
	c.check()
	return core.SweepReport{}, nil
}

func (c *countingSweeper) check() {
	if c.users >= 3 && c.scopes >= 1 {
		c.closeOnce.Do(func() { close(c.enough) })
	}
}

// TestRunSweepsBothKindsAndStops checks that Run calls both sweeps, keeps
// going after a failed pass, reports every pass, and returns when ctx ends.
func TestRunSweepsBothKindsAndStops(t *testing.T) {
	s := &countingSweeper{failUsers: true, enough: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	failures := 0
	done := make(chan error)
	go func() {
		done <- sweeper.Run(ctx, s, sweeper.Options{UserInterval: time.Millisecond, ScopeInterval: 2 * time.Millisecond,
			OnReport: func(kind string, r core.SweepReport, err error) {
				mu.Lock()
				defer mu.Unlock()
				if kind == "users" && err != nil {
					failures++
				}
			}})
	}()
	<-s.enough
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failures < 3 {
		t.Fatalf("reported %d failed user passes, want at least 3 (Run must keep going)", failures)
	}
}
