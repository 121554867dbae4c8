package server

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/presencekit/presence/cmd/internal/shown"
	"github.com/presencekit/presence/core"
)

// userTracker keeps "online users by status" without scanning the
// keyspace. It knows a user from
//
//   - the change log: every instance's published changes, read in order
//     by the hub (at start-up the whole kept log, then each new entry);
//   - this instance's own API calls: a user who heartbeats, logs in or
//     whose status is read here is noted, and resolved at the next
//     reconcile;
//
// and a reconcile pass re-reads the statuses of everyone it knows
// (Engine.Statuses, 1,000 users a call) every ReconcileEvery, which drops
// users who went offline without a change it saw and corrects any drift.
// Users online since before the oldest kept log entry who never touch this
// instance are not counted: the engine offers no way to enumerate sessions
// without scanning, by design. The map is bounded by max.
type userTracker struct {
	max int

	mu      sync.Mutex
	users   map[string]trackedUser // users not OFFLINE
	pending map[string]struct{}    // noted, status unknown until reconcile
	asOf    time.Time              // last reconcile
}

type trackedUser struct {
	status core.Status
	at     time.Time // Redis time of the change or read that set it
}

func newUserTracker(max int) *userTracker {
	return &userTracker{max: max, users: map[string]trackedUser{}, pending: map[string]struct{}{}}
}

// apply records a published change.
func (t *userTracker) apply(c core.Change) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, c.User)
	t.setLocked(c.User, c.To, c.At)
}

func (t *userTracker) setLocked(user string, st core.Status, at time.Time) {
	old, known := t.users[user]
	if known && at.Before(old.at) {
		return // older news
	}
	if known && old.status == st {
		return // the same status: it holds since the earlier instant
	}
	if st == core.StatusOffline {
		delete(t.users, user)
		return
	}
	if known || len(t.users) < t.max {
		t.users[user] = trackedUser{status: st, at: at}
	}
}

// note marks user as worth a look at the next reconcile.
func (t *userTracker) note(user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.users[user]; ok {
		return
	}
	if len(t.pending) < t.max {
		t.pending[user] = struct{}{}
	}
}

// reconcile re-reads the status of every user it knows.
func (t *userTracker) reconcile(ctx context.Context, eng *core.Engine) error {
	t.mu.Lock()
	users := make([]string, 0, len(t.users)+len(t.pending))
	for u := range t.users {
		users = append(users, u)
	}
	for u := range t.pending {
		users = append(users, u)
	}
	t.mu.Unlock()
	for chunk := range slices.Chunk(users, core.MaxBatch) {
		sts, err := eng.Statuses(ctx, chunk)
		if err != nil {
			return err
		}
		t.mu.Lock()
		for _, st := range sts {
			delete(t.pending, st.User)
			t.setLocked(st.User, st.Status, t.sinceLocked(st))
		}
		t.mu.Unlock()
	}
	t.mu.Lock()
	t.asOf = time.Now()
	t.mu.Unlock()
	return nil
}

// sinceLocked is when a re-read user entered the status it was read in:
// the known instant if the status is the one already known (a re-read
// says nothing new); the read's instant if it changed unseen; for a user
// first learnt from a read, the earliest login of its live devices.
func (t *userTracker) sinceLocked(st core.UserStatus) time.Time {
	if old, ok := t.users[st.User]; ok {
		if old.status == st.Status {
			return old.at
		}
		return st.At // changed unseen: the read is the best bound known
	}
	since := st.At
	for _, d := range st.Devices {
		if !d.LoginAt.IsZero() && d.LoginAt.Before(since) {
			since = d.LoginAt
		}
	}
	return since
}

// UsersOverview is what the dashboard shows of users.
type UsersOverview struct {
	// ByStatus counts the known users in each status but OFFLINE.
	ByStatus map[string]int `json:"by_status"`
	// Recent are the most recently changed of them.
	Recent []UserStatus `json:"recent"`
	// Tracked is how many users are counted; Pending how many wait for
	// the next reconcile.
	Tracked int `json:"tracked"`
	Pending int `json:"pending"`
	// ReconciledAt is the last reconcile, by this host's clock.
	ReconciledAt int64 `json:"reconciled_at,omitempty"`
}

func (t *userTracker) overview(recent int) UsersOverview {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := UsersOverview{ByStatus: map[string]int{}, Tracked: len(t.users), Pending: len(t.pending), ReconciledAt: millis(t.asOf)}
	for _, s := range shown.Statuses() {
		out.ByStatus[s.String()] = 0
	}
	all := make([]UserStatus, 0, len(t.users))
	for u, tu := range t.users {
		out.ByStatus[tu.status.String()]++
		all = append(all, UserStatus{User: u, Status: tu.status.String(), At: millis(tu.at)})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].At != all[j].At {
			return all[i].At > all[j].At
		}
		return all[i].User < all[j].User
	})
	out.Recent = all[:min(recent, len(all))]
	return out
}

// scopeTracker keeps the scopes touched through this instance and their
// counts, refreshed by Count every ScopeRefresh, for the dashboard's
// hottest scopes. The engine's registry of active scopes is internal to
// the core, so scopes touched only through other instances are missing.
type scopeTracker struct {
	max int

	mu     sync.Mutex
	scopes map[core.Scope]*scopeInfo
}

type scopeInfo struct {
	touched time.Time
	count   core.Count
	err     string
}

func newScopeTracker(max int) *scopeTracker {
	return &scopeTracker{max: max, scopes: map[core.Scope]*scopeInfo{}}
}

// note records a touch of sc at now (this host's clock), evicting the
// least recently touched scope when full.
func (t *scopeTracker) note(sc core.Scope, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if si, ok := t.scopes[sc]; ok {
		si.touched = now
		return
	}
	if len(t.scopes) >= t.max {
		var oldest core.Scope
		var at time.Time
		for s, si := range t.scopes {
			if at.IsZero() || si.touched.Before(at) {
				oldest, at = s, si.touched
			}
		}
		delete(t.scopes, oldest)
	}
	t.scopes[sc] = &scopeInfo{touched: now}
}

// setCount records a count read through the API.
func (t *scopeTracker) setCount(sc core.Scope, c core.Count) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if si, ok := t.scopes[sc]; ok {
		si.count, si.err = c, ""
	}
}

// refresh counts every tracked scope, and forgets those empty and
// untouched for idle.
func (t *scopeTracker) refresh(ctx context.Context, eng *core.Engine, now time.Time, idle time.Duration) {
	t.mu.Lock()
	scopes := make([]core.Scope, 0, len(t.scopes))
	for sc := range t.scopes {
		scopes = append(scopes, sc)
	}
	t.mu.Unlock()
	for _, sc := range scopes {
		c, err := eng.Count(ctx, sc)
		t.mu.Lock()
		if si, ok := t.scopes[sc]; ok {
			switch {
			case err != nil:
				si.err = toAPIError(err, "").Code
			case c.N == 0 && now.Sub(si.touched) > idle:
				delete(t.scopes, sc)
			default:
				si.count, si.err = c, ""
			}
		}
		t.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// ScopeCount is one scope of the dashboard's hottest scopes.
type ScopeCount struct {
	Scope string `json:"scope"`
	Count int64  `json:"count"`
	AsOf  int64  `json:"as_of,omitempty"`
	Stale bool   `json:"stale,omitempty"`
	Error string `json:"error,omitempty"`
}

// top returns the n scopes with the most members.
func (t *scopeTracker) top(n int) []ScopeCount {
	t.mu.Lock()
	out := make([]ScopeCount, 0, len(t.scopes))
	for sc, si := range t.scopes {
		out = append(out, ScopeCount{Scope: sc.String(), Count: si.count.N, AsOf: millis(si.count.AsOf), Stale: si.count.Stale, Error: si.err})
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Scope < out[j].Scope
	})
	return out[:min(n, len(out))]
}

// sweepLog keeps this instance's last sweep report of each kind and the
// recent ones that did something.
type sweepLog struct {
	mu     sync.Mutex
	last   map[string]SweepReport
	recent []SweepReport // newest first
	keep   int
}

func newSweepLog(keep int) *sweepLog {
	return &sweepLog{last: map[string]SweepReport{}, keep: keep}
}

// record stores a pass; it reports whether the pass did something worth
// showing (or failed).
func (l *sweepLog) record(r SweepReport) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[r.Kind] = r
	if r.Visited == 0 && r.Removed == 0 && r.Released == 0 && r.Changes == 0 && r.Error == "" {
		return false
	}
	l.recent = append([]SweepReport{r}, l.recent...)
	if len(l.recent) > l.keep {
		l.recent = l.recent[:l.keep]
	}
	return true
}

func (l *sweepLog) snapshot() SweeperResponse {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := SweeperResponse{Recent: append([]SweepReport{}, l.recent...)}
	if r, ok := l.last["users"]; ok {
		out.Users = &r
	}
	if r, ok := l.last["scopes"]; ok {
		out.Scopes = &r
	}
	return out
}
