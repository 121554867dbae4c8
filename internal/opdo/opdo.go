// Package opdo runs a core.Op through any core.Presence (Engine, Model,
// the WebAssembly host's Engine) and returns its outcome with the type the
// op's doc names, for the tests and tools that compare them call by call.
//
//	st, err := opdo.Do[core.UserStatus](ctx, model, core.ReadStatus{User: "u1"})
package opdo

import (
	"context"
	"fmt"

	"github.com/presencekit/presence/core"
)

// Do runs op on p and returns its outcome as a T: the zero T where p
// returned none (an op whose outcome is nil, or an error before one). An
// outcome of another type is a mistake of the caller's, and panics.
func Do[T any](ctx context.Context, p core.Presence, op core.Op) (T, error) {
	v, err := p.Do(ctx, op)
	if v == nil {
		var zero T
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		panic(fmt.Sprintf("opdo: %T returns a %T, not a %T", op, v, t))
	}
	return t, err
}

// Err runs op on p for its error alone, as for an op whose outcome is nil
// (ScopeTouch, TouchBatch, AppendLog, AckEvents).
func Err(ctx context.Context, p core.Presence, op core.Op) error {
	_, err := p.Do(ctx, op)
	return err
}
