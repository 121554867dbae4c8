package server

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter holds one token bucket per user. Buckets that have refilled are
// dropped by prune, so the map holds only users who beat recently.
type limiter struct {
	name  string // the budget, for presence_rate_limited_total
	limit rate.Limit
	burst int

	mu    sync.Mutex
	users map[string]*rate.Limiter
}

// newLimiter returns the limiter of budget name: perSecond tokens a second
// per user (no limit if negative), burst at once.
func newLimiter(name string, perSecond float64, burst int) *limiter {
	l := &limiter{name: name, limit: rate.Limit(perSecond), burst: burst, users: map[string]*rate.Limiter{}}
	if perSecond < 0 {
		l.limit = rate.Inf
	}
	return l
}

// allow takes one token of user's bucket at instant now. When the bucket is
// empty it returns false and how long until a token is back.
func (l *limiter) allow(user string, now time.Time) (bool, time.Duration) {
	if l.limit == rate.Inf {
		return true, 0
	}
	l.mu.Lock()
	lim, ok := l.users[user]
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.users[user] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// prune drops the buckets that are full at now: forgetting them changes
// nothing, as a new bucket starts full.
func (l *limiter) prune(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for u, lim := range l.users {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.users, u)
		}
	}
}

func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.users)
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
