package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/core"
)

// testStore is a minimal go-redis Store for the core's own tests, so that
// they do not depend on the adapters.
type testStore struct{ c *redis.Client }

func (s testStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	out := make([]core.Result, len(calls))
	for i, c := range calls {
		var v any
		var err error
		if c.Source != "" {
			v, err = s.c.Eval(ctx, c.Source, c.Keys, toAny(c.Args)...).Result()
		} else {
			v, err = s.c.EvalSha(ctx, c.SHA, c.Keys, toAny(c.Args)...).Result()
		}
		if errors.Is(err, redis.Nil) {
			v, err = nil, nil
		}
		out[i] = core.Result{Value: toValue(v), Err: core.ClassifyError(err)}
	}
	return out
}

func toAny(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

func toValue(v any) core.Value {
	switch v := v.(type) {
	case int64:
		return core.IntValue(v)
	case string:
		return core.StringValue(v)
	case []any:
		items := make([]core.Value, len(v))
		for i, x := range v {
			items[i] = toValue(x)
		}
		return core.ArrayValue(items...)
	}
	return core.NilValue()
}

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
	cfg.Clock = clk
	e, err := core.New(testStore{c}, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}
