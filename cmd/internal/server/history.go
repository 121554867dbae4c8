package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/cmd/history"
	"github.com/presencekit/presence/core"
)

// newSnapshotter returns the online-history snapshotter of cfg.History,
// or nil when it names no database.
func (s *Server) newSnapshotter(cfg history.Config) (*history.Snapshotter, error) {
	if cfg.Store == nil && cfg.DSN == "" {
		return nil, nil
	}
	if cfg.Source == nil {
		cfg.Source = history.SourceFunc(s.collect)
	}
	if cfg.Logger == nil {
		cfg.Logger = s.log
	}
	next := cfg.OnResult
	cfg.OnResult = func(r history.Result, err error) {
		switch {
		case err != nil:
			s.m.history.WithLabelValues("failed").Inc()
		case r.Written:
			s.m.history.WithLabelValues("written").Inc()
		default:
			s.m.history.WithLabelValues("taken").Inc()
		}
		if next != nil {
			next(r, err)
		}
	}
	return history.New(cfg)
}

// collect is the server's history source: the online counts from Redis
// (Engine.Online, every instance's users), the scopes this instance
// tracks for the dashboard with their last counts, and the users it knows
// to be online (see userTracker).
func (s *Server) collect(ctx context.Context, users bool) (history.Snapshot, error) {
	on, err := s.eng.Online(ctx)
	if err != nil {
		return history.Snapshot{}, err
	}
	snap := history.Snapshot{Online: map[string]int64{}}
	for st, n := range on {
		snap.Online[st.String()] = n
	}
	s.scopes.mu.Lock()
	for sc, si := range s.scopes.scopes {
		if si.err == "" {
			snap.Scopes = append(snap.Scopes, history.ScopeCount{Class: sc.Class, Scope: sc.ID, Members: si.count.N})
		}
	}
	s.scopes.mu.Unlock()
	if users {
		s.users.mu.Lock()
		for u, tu := range s.users.users {
			snap.Users = append(snap.Users, history.UserStatus{User: u, Status: tu.status.String()})
		}
		s.users.mu.Unlock()
	}
	return snap, nil
}

// HistoryResponse is the body of GET /v1/history: online users by status
// over time, the peak, and a scope's count over time when asked for.
type HistoryResponse struct {
	From   int64          `json:"from"`
	To     int64          `json:"to"`
	StepMS int64          `json:"step_ms"`
	Points []HistoryPoint `json:"points"`
	// Peak is the point with the most users online (all statuses), if any.
	Peak  *HistoryPoint `json:"peak,omitempty"`
	Scope *ScopeHistory `json:"scope,omitempty"`
}

// HistoryPoint is one step: per status, the largest count of the step's
// snapshots, and the largest total of one snapshot.
type HistoryPoint struct {
	At       int64            `json:"at"`
	ByStatus map[string]int64 `json:"by_status"`
	Total    int64            `json:"total"`
}

// ScopeHistory is a scope's member count over time (recorded while the
// scope was among its class's busiest).
type ScopeHistory struct {
	Scope  string       `json:"scope"`
	Points []CountPoint `json:"points"`
}

// CountPoint is a scope's count in one step.
type CountPoint struct {
	At    int64 `json:"at"`
	Count int64 `json:"count"`
}

// maxHistoryPoints bounds the steps of one /v1/history answer.
const maxHistoryPoints = 10_000

// historyRange parses from, to and step (milliseconds; step may also be a
// Go duration such as 5m). Defaults: the last 24 hours, in steps of 1/288
// of the range and at least the snapshot interval.
func historyRange(r *http.Request, now time.Time, every time.Duration) (from, to time.Time, step time.Duration, e *Error) {
	q := r.URL.Query()
	ms := func(name string, def time.Time) (time.Time, *Error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<50 {
			return time.Time{}, fieldErr(name, "milliseconds since the Unix epoch")
		}
		return time.UnixMilli(n), nil
	}
	if to, e = ms("to", now); e != nil {
		return
	}
	if from, e = ms("from", to.Add(-24*time.Hour)); e != nil {
		return
	}
	if !from.Before(to) {
		e = fieldErr("from", "must be before to")
		return
	}
	step = max(every, (to.Sub(from)+287)/288)
	if v := q.Get("step"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			step = time.Duration(n) * time.Millisecond
		} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
			step = d
		} else {
			e = fieldErr("step", "milliseconds, or a duration such as 5m")
			return
		}
	}
	if to.Sub(from)/step > maxHistoryPoints {
		e = fieldErr("step", "at most %d steps in a range", maxHistoryPoints)
	}
	return
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, _ Principal) *Error {
	if s.snaps == nil {
		return apiErr(http.StatusNotFound, CodeNotFound, "the online history is off: start the service with a history database (presence serve --history-db)")
	}
	st := s.snaps.Store()
	if st == nil {
		return apiErr(http.StatusServiceUnavailable, CodeUnavailable, "the history database has not been reached yet")
	}
	from, to, step, e := historyRange(r, time.Now(), s.snaps.Every())
	if e != nil {
		return e
	}
	var sc *core.Scope
	if v := r.URL.Query().Get("scope"); v != "" {
		class, id, ok := strings.Cut(v, ":")
		if !ok || class == "" || id == "" {
			return fieldErr("scope", "class:id, such as room:lobby")
		}
		sc = &core.Scope{Class: class, ID: id}
	}
	pts, err := st.Online(r.Context(), from, to, step)
	if err != nil {
		s.log.WarnContext(r.Context(), "presence: reading the history failed", "err", err)
		return apiErr(http.StatusServiceUnavailable, CodeUnavailable, "the history database cannot be read")
	}
	out := HistoryResponse{From: from.UnixMilli(), To: to.UnixMilli(), StepMS: step.Milliseconds(), Points: make([]HistoryPoint, 0, len(pts))}
	for _, p := range pts {
		hp := HistoryPoint{At: p.At.UnixMilli(), ByStatus: p.ByStatus, Total: p.Total}
		out.Points = append(out.Points, hp)
		if out.Peak == nil || hp.Total > out.Peak.Total {
			out.Peak = &hp
		}
	}
	if sc != nil {
		cps, err := st.ScopeCounts(r.Context(), sc.Class, sc.ID, from, to, step)
		if err != nil {
			s.log.WarnContext(r.Context(), "presence: reading the history failed", "err", err)
			return apiErr(http.StatusServiceUnavailable, CodeUnavailable, "the history database cannot be read")
		}
		out.Scope = &ScopeHistory{Scope: sc.String(), Points: make([]CountPoint, 0, len(cps))}
		for _, c := range cps {
			out.Scope.Points = append(out.Scope.Points, CountPoint{At: c.At.UnixMilli(), Count: c.Members})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
