package core

import "time"

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

// LogChunk is the most events one change log append carries (logChunk).
const LogChunk = logChunk

// NopMetrics discards everything, for tests that implement only some of
// Metrics by embedding it.
type NopMetrics = nopMetrics

// Meta is, for tests, the meta hash of user bucket b (0 ≤ b < UserBuckets): its
// layout version and its pages' level and split pointer (lua/recordlib.lua).
func (k KeyNames) Meta(b int) string { return k.engine.settings.users[b].keys[0] }

// CompactIndex is, for tests, the due index of sc (see CompactMeta).
func (k KeyNames) CompactIndex(sc Scope) (string, error) {
	sk, err := k.selfSized(sc)
	return sk.compactIndexKey(), err
}

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
