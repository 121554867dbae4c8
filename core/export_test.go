package core

import (
	"time"

	"github.com/presencekit/presence/internal/keyspace"
)

// GroupQueued is how many calls wait in e's group commit queue.
func GroupQueued(e *Engine) int {
	e.comb.mu.Lock()
	defer e.comb.mu.Unlock()
	return len(e.comb.queue)
}

// PageOf is the page of user at level, split pointer split (userPage).
func PageOf(user string, level, split int) int {
	return int(userPage(user, uint(level), uint32(split)))
}

// SteadyChunk is the most beats one steady beat call carries (steadyChunk).
const SteadyChunk = steadyChunk

// LogChunk is the most events one change log append carries (logChunk).
const LogChunk = logChunk

// NopMetrics discards everything, for tests that implement only some of
// Metrics by embedding it.
type NopMetrics = nopMetrics

// Keys is the key layout of e, as internal/keyspace names it: what a
// tool that knows e's Config builds with keyspace.New.
func Keys(e *Engine) keyspace.Layout { return e.settings.keys.space() }

// NowArg formats t as plans and scripts take "now" (nowArg).
func NowArg(t time.Time) string { return nowArg(t) }

// Errors of stepping a plan (errPlanResults…), which only a driver's
// mistake causes.
var (
	ErrPlanResults = errPlanResults
	ErrPlanDone    = errPlanDone
	ErrPlanPending = errPlanPending
)

// Plan is, for tests, a Stepper whose Outcome is typed, as every plan of
// an operation whose outcome is a T is.
type Plan[T any] interface {
	Stepper
	Outcome() (T, error)
}

// FeedMemory is how many event IDs a Repeats remembers (feedMemory).
const FeedMemory = feedMemory

// Aggregate is the status others see (aggregate).
func Aggregate(states []Status, manual Manual) Status { return aggregate(states, manual) }

// MarshalChange is the JSON published for c, without an outbox ID
// (marshalChange).
func MarshalChange(c Change) []byte { return marshalChange(c, "") }

// MarshalKick is the JSON published for k, without an outbox ID
// (marshalKick).
func MarshalKick(k Kick) []byte { return marshalKick(k, "") }

// UnmarshalChange decodes a message of the change channel (unmarshalChange).
func UnmarshalChange(b []byte) (Change, error) {
	c, _, err := unmarshalChange(b)
	return c, err
}

// UnmarshalKick decodes a message of a kick channel (unmarshalKick).
func UnmarshalKick(b []byte) (Kick, error) {
	k, _, err := unmarshalKick(b)
	return k, err
}
