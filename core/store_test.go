package core_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// manualClock is an injected clock for step tables.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }

func newMiniEngine(tb testing.TB, cfg core.Config) (*core.Engine, *manualClock, *miniredis.Miniredis) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
	mr.SetTime(clk.t)
	mr.ClockTTL(true)
	return engineOn(tb, mr, clk, cfg), clk, mr
}

// engineOn returns another engine on the same miniredis and clock.
func engineOn(tb testing.TB, mr *miniredis.Miniredis, clk *manualClock, cfg core.Config) *core.Engine {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	tb.Cleanup(func() { c.Close() })
	cfg.Clock = clk.Now
	e, err := core.New(goredis.New(c), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}
