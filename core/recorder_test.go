package core_test

import (
	"context"
	"slices"
	"sync"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
)

// recorder is a Store that records every call and can act before each
// one (fault and race injection through the small interface).
type recorder struct {
	inner core.Store
	mu    sync.Mutex
	calls []core.Call
	// before, if set, runs before each batch reaches inner; a non-nil
	// error fails every call of the batch.
	before func(calls []core.Call) error
}

func (r *recorder) Eval(ctx context.Context, calls []core.Call) []core.Result {
	r.mu.Lock()
	r.calls = append(r.calls, kept(calls)...)
	before := r.before
	r.mu.Unlock()
	if before != nil {
		if err := before(calls); err != nil {
			out := make([]core.Result, len(calls))
			for i := range out {
				out[i].Err = err
			}
			return out
		}
	}
	return r.inner.Eval(ctx, calls)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// scriptOf names the script a call runs, by matching SHA or source.
func scriptOf(c core.Call) string {
	for _, s := range luascripts.All() {
		if c.SHA == s.SHA || c.Source == s.Source() {
			return s.Name
		}
	}
	return "?"
}

// kept copies calls, as a Store that keeps them past Eval must (Store).
func kept(calls []core.Call) []core.Call {
	out := make([]core.Call, len(calls))
	for i, c := range calls {
		out[i] = core.Call{SHA: c.SHA, Source: c.Source, Keys: slices.Clone(c.Keys), Args: slices.Clone(c.Args)}
	}
	return out
}
