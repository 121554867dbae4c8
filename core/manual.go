package core

import (
	"context"
	"strconv"
	"time"
)

// SetManual sets the user's manual status (ManualNone clears it) for ttl,
// or until cleared when ttl is 0 (design section 6). A manual status never
// makes anyone online.
func (e *Engine) SetManual(ctx context.Context, user string, m Manual, ttl time.Duration) ([]Change, error) {
	if err := checkManual(user, m, ttl); err != nil {
		return nil, err
	}
	b := e.settings.keys.userBucket(user)
	args := append(e.userArgs(b, 3), user, strconv.Itoa(int(m)), itoa(millis(ttl)))
	vals, err := e.eval(ctx, "manual", []scriptCall{{e.scripts.manual, e.userKeys(b), args}})
	if err != nil {
		return nil, err
	}
	now, rest, err := splitReply(vals[0], 1)
	if err != nil {
		return nil, err
	}
	changes, err := decodeChanges(rest[0], now)
	if err != nil {
		return nil, err
	}
	e.publish(ctx, changes, nil)
	return changes, nil
}
