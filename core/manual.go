package core

import (
	"context"
	"time"
)

// SetManual sets the user's manual status (ManualNone clears it) for ttl,
// or until cleared when ttl is 0 (docs/design.md §6). A manual status never
// makes anyone online.
func (e *Engine) SetManual(ctx context.Context, user string, m Manual, ttl time.Duration) ([]Change, error) {
	p := e.plans.setManual(e.nowArg(), user, m, ttl)
	if err := e.exec(ctx, p); err != nil {
		return nil, err
	}
	return p.Outcome()
}
