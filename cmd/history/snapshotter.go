package history

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"
)

// Snapshot is what one snapshot records.
type Snapshot struct {
	// At is the start of the snapshot's minute (of its interval).
	At time.Time
	// Online is the number of users in each published status but
	// OFFLINE, by its name (core.Status.String).
	Online map[string]int64
	// Scopes are member counts of scopes; the Snapshotter keeps the TopN
	// busiest of each class.
	Scopes []ScopeCount
	// Users are the online users with their status, when the Snapshotter
	// records them (Config.Users).
	Users []UserStatus
}

// ScopeCount is one scope's member count.
type ScopeCount struct {
	Class, Scope string
	Members      int64
}

// UserStatus is one online user and its status.
type UserStatus struct {
	User, Status string
}

// Source takes the figures of a snapshot: the online counts, scope counts
// (the Snapshotter keeps the busiest of each class) and, when users is
// set, the online users. It leaves Snapshot.At to the caller.
type Source interface {
	Collect(ctx context.Context, users bool) (Snapshot, error)
}

// SourceFunc is a Source as a function.
type SourceFunc func(ctx context.Context, users bool) (Snapshot, error)

// Collect calls f.
func (f SourceFunc) Collect(ctx context.Context, users bool) (Snapshot, error) { return f(ctx, users) }

// Config configures a Snapshotter. Store and Source are required; the zero
// value of every other field means its documented default.
type Config struct {
	// Store is the database the snapshots go to. When nil, the
	// Snapshotter opens DSN (see Open) at its first attempt, and again at
	// each attempt until that succeeds: a database that is down at start-up
	// delays the history, never the caller.
	Store *Store
	// DSN names the database to open when Store is nil.
	DSN string
	// Source takes the snapshots' figures.
	Source Source
	// Every is the snapshot interval: one snapshot per interval, keyed by
	// its start (the clock's time truncated to Every). Default 1 min.
	Every time.Duration
	// TopN is how many of each scope class's busiest scopes are recorded.
	// Default 10.
	TopN int
	// Users records the list of online users with their status too.
	Users bool
	// Retention is how long snapshots are kept; older ones are deleted
	// after each snapshot this instance writes. Default 30 days; negative:
	// kept for ever.
	Retention time.Duration
	// RetryEvery is how long Run waits after a failed snapshot before it
	// tries again. Default 10 s.
	RetryEvery time.Duration
	// Timeout bounds one attempt (taking the figures and writing them).
	// Default 30 s.
	Timeout time.Duration
	// Instance names this process in presence_snapshots. Default the host
	// name and the process ID.
	Instance string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// After waits; Run calls it between attempts. Default time.After.
	After func(time.Duration) <-chan time.Time
	// Logger receives a line per failed snapshot (at error level, with
	// the number of failures in a row) and a line when snapshots succeed
	// again. Default: discard.
	Logger *slog.Logger
	// OnResult, if set, is called after every attempt (for metrics).
	OnResult func(Result, error)
}

// Result is the outcome of one snapshot attempt.
type Result struct {
	// At is the snapshot's minute.
	At time.Time
	// Written is true when this instance wrote the minute, false when
	// another instance had written it already.
	Written bool
	// Scopes and Users are how many scope counts and users were written.
	Scopes, Users int
	// Pruned is how many old snapshots retention deleted.
	Pruned int64
}

// Snapshotter takes a snapshot every interval; see the package
// documentation.
type Snapshotter struct {
	cfg Config

	openMu sync.Mutex // one Open at a time
	mu     sync.Mutex // guards store; never held while opening
	store  *Store
}

// New returns a Snapshotter for cfg.
func New(cfg Config) (*Snapshotter, error) {
	if (cfg.Store == nil && cfg.DSN == "") || cfg.Source == nil {
		return nil, errors.New("history: Config needs a Store (or a DSN) and a Source")
	}
	if cfg.Every == 0 {
		cfg.Every = time.Minute
	}
	if cfg.TopN == 0 {
		cfg.TopN = 10
	}
	if cfg.Retention == 0 {
		cfg.Retention = 30 * 24 * time.Hour
	}
	if cfg.RetryEvery == 0 {
		cfg.RetryEvery = 10 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Every < time.Second || cfg.TopN < 0 || cfg.RetryEvery < 0 || cfg.Timeout < 0 {
		return nil, errors.New("history: Every must be at least 1 s; TopN, RetryEvery and Timeout not negative")
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Snapshotter{cfg: cfg, store: cfg.Store}, nil
}

// Store returns the history database, or nil while it has not been
// opened (Config.DSN, at the first successful attempt).
func (s *Snapshotter) Store() *Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store
}

// Close closes the database the Snapshotter opened itself (not a
// Config.Store).
func (s *Snapshotter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store == nil || s.cfg.Store != nil {
		return nil
	}
	err := s.store.Close()
	s.store = nil
	return err
}

func (s *Snapshotter) open(ctx context.Context) (*Store, error) {
	if st := s.Store(); st != nil {
		return st, nil
	}
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if st := s.Store(); st != nil {
		return st, nil
	}
	st, err := Open(ctx, s.cfg.DSN)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.store = st
	s.mu.Unlock()
	return st, nil
}

// Every returns the snapshot interval.
func (s *Snapshotter) Every() time.Duration { return s.cfg.Every }

// Take takes the snapshot of the interval that holds now and writes it,
// unless another instance has written that interval; then, if it wrote
// it, deletes the snapshots older than the retention. The attempt is
// bounded by Config.Timeout.
func (s *Snapshotter) Take(ctx context.Context, now time.Time) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	at := now.Truncate(s.cfg.Every)
	res := Result{At: at}
	snap, err := s.cfg.Source.Collect(ctx, s.cfg.Users)
	if err != nil {
		return res, fmt.Errorf("history: taking the snapshot of %s: %w", at.UTC().Format(time.RFC3339), err)
	}
	snap.At = at
	snap.Scopes = topPerClass(snap.Scopes, s.cfg.TopN)
	if !s.cfg.Users {
		snap.Users = nil
	}
	store, err := s.open(ctx)
	if err != nil {
		return res, fmt.Errorf("history: opening the database: %w", err)
	}
	written, err := store.Write(ctx, snap, s.cfg.Instance, now)
	if err != nil {
		return res, fmt.Errorf("history: writing the snapshot of %s: %w", at.UTC().Format(time.RFC3339), err)
	}
	res.Written = written
	if !written {
		return res, nil
	}
	res.Scopes, res.Users = len(snap.Scopes), len(snap.Users)
	if s.cfg.Retention > 0 {
		n, err := store.Prune(ctx, at.Add(-s.cfg.Retention))
		if err != nil {
			return res, err
		}
		res.Pruned = n
	}
	return res, nil
}

// Run takes a snapshot every interval until ctx ends, and returns ctx's
// error. A failed snapshot is logged at error level and tried again after
// RetryEvery, for as long as its interval lasts (then the next interval's
// is taken instead).
func (s *Snapshotter) Run(ctx context.Context) error {
	var done time.Time // the last interval written or found written
	failures := 0
	for {
		now := s.cfg.Now()
		at := now.Truncate(s.cfg.Every)
		wait := at.Add(s.cfg.Every).Sub(now)
		if !at.Equal(done) {
			res, err := s.Take(ctx, now)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if s.cfg.OnResult != nil {
				s.cfg.OnResult(res, err)
			}
			switch {
			case err != nil:
				failures++
				s.cfg.Logger.ErrorContext(ctx, "presence: online-history snapshot failed; retrying",
					"err", err, "failures", failures, "retry_in", s.cfg.RetryEvery)
				wait = min(wait, s.cfg.RetryEvery)
			default:
				if failures > 0 {
					s.cfg.Logger.InfoContext(ctx, "presence: online-history snapshots work again", "after_failures", failures)
				}
				failures = 0
				done = at
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.cfg.After(wait):
		}
	}
}

// topPerClass keeps the n scopes of each class with the most members.
func topPerClass(scopes []ScopeCount, n int) []ScopeCount {
	sorted := append([]ScopeCount(nil), scopes...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		if a.Members != b.Members {
			return a.Members > b.Members
		}
		return a.Scope < b.Scope
	})
	out := sorted[:0]
	kept := map[string]int{}
	seen := map[[2]string]bool{}
	for _, sc := range sorted {
		k := [2]string{sc.Class, sc.Scope}
		if kept[sc.Class] >= n || seen[k] {
			continue
		}
		seen[k] = true
		kept[sc.Class]++
		out = append(out, sc)
	}
	return out
}
