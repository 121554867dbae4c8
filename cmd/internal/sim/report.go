package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// Stats are the counters of a run.
type Stats struct {
	Beats           int // heartbeats sent
	Batches         int // HeartbeatBatch calls
	Lost            int // heartbeats lost on the way
	Refused         int // heartbeats the engine refused
	RefusedExpected int // heartbeats the truth refuses (superseded tokens)
	StaleSent       int // heartbeats of kicked clients with their old token
	Logins          int
	Kicks           int // sessions the engine kicked
	KicksExpected   int // sessions the truth kicks
	Switches        int // network switches (disconnect, quick reconnect)
	Vanished        int // sessions that ended without a goodbye
	Manual          int // manual status changes
	Touches         int
	Leaves          int
	Watches         int
	Crashes         int // edge crashes
	Moved           int // devices that moved to another edge after a crash
	Events          int // status changes the engine published
	TruthChanges    int // status changes of the truth
	Sweeps          int
	Census          int // users whose full status was compared
	CensusMismatch  int
	CountChecks     int
	CountMismatch   int
	Violations      int
}

// Row is one point of the time series, taken at a sweep.
type Row struct {
	Elapsed time.Duration // virtual time since the start
	Wall    time.Duration // wall time since the start
	// Truth and Engine count users per status: the truth now, and what
	// Engine.Online says (the published statuses, debounced).
	Truth, Engine map[core.Status]int64
	// Pending counts users whose published status lags a recent change
	// (allowed); Unsettled those whose published status is still wrong
	// after the debounce allows (a violation).
	Pending, Unsettled int
	// ViewersTruth and ViewersEngine sum the video counts.
	ViewersTruth, ViewersEngine int64
	// CountMismatch counts videos whose count disagrees with the truth as
	// of the count's instant; MaxStaleness is the oldest count read.
	CountMismatch int
	MaxStaleness  time.Duration
	// Cumulative counters.
	Events, TruthChanges, Beats, Refused, RefusedExpected, Kicks, KicksExpected int
	RedisTrips, ScriptCalls                                                     int64
}

// sweep runs the user and scope sweeps on one live edge, then compares
// the engine with the truth and appends a row.
func (w *world) sweep(census bool) error {
	e := w.edges[(w.currentTick/int(w.cfg.SweepEvery.Milliseconds()/w.tickMS))%len(w.edges)]
	if !e.up {
		e = w.edges[w.liveEdge()]
	}
	swept, err := opdo.Do[core.SweepReport](w.ctx, e.engine, core.SweepUsers{})
	if err != nil {
		return fmt.Errorf("sim: sweep users: %w", err)
	}
	w.changes(swept.Changes)
	if _, err := opdo.Do[core.SweepReport](w.ctx, e.engine, core.SweepScopes{}); err != nil {
		return fmt.Errorf("sim: sweep scopes: %w", err)
	}
	w.stats.Sweeps++
	row := Row{Elapsed: time.Duration(w.now-w.start) * time.Millisecond, Truth: map[core.Status]int64{}}

	// Users per status: the truth, the published statuses (whose tally
	// must be what Online says), and how far published lags truth.
	published := map[core.Status]int64{}
	for i := range w.users {
		u := &w.users[i]
		w.advance(u, w.now)
		if u.status != core.StatusOffline {
			row.Truth[u.status]++
		}
		if u.published != core.StatusOffline {
			published[u.published]++
		}
		if u.published != u.status {
			if w.now-u.since >= w.maxPublishLagMS {
				row.Unsettled++
				w.violation("%s is %s since %s ago, but its published status is %s", u.id, u.status,
					time.Duration(w.now-u.since)*time.Millisecond, u.published)
			} else {
				row.Pending++
			}
		}
	}
	online, err := opdo.Do[map[core.Status]int64](w.ctx, e.engine, core.ReadOnline{})
	if err != nil {
		return fmt.Errorf("sim: online: %w", err)
	}
	row.Engine = online
	for _, s := range statusCols {
		if online[s] != published[s] {
			w.violation("Online says %d %s, the published changes make %d", online[s], s, published[s])
		}
	}

	// Video counts, once per sweep interval of their class: each must
	// have been the truth at its instant (AsOf), and stay the truth until
	// at most one sweep interval (plus the simulator's sweep period) ago.
	windowMS := videoWindow.Milliseconds()
	keep := w.now - (20*time.Minute + videoSweep + w.cfg.SweepEvery).Milliseconds() // count keys live 10 min by default
	for i := range w.videos {
		v := &w.videos[i]
		for m, last := range v.lastTouch {
			if w.now-last > windowMS {
				delete(v.lastTouch, m)
			}
		}
		v.samples = append(v.samples, sample{at: w.now, count: int64(len(v.lastTouch))})
		for len(v.samples) > 1 && v.samples[0].at < keep {
			v.samples = v.samples[1:]
		}
	}
	if w.now-w.lastCountCheck >= videoSweep.Milliseconds() {
		if err := w.checkCounts(e); err != nil {
			return err
		}
	}
	row.ViewersTruth, row.ViewersEngine, row.CountMismatch, row.MaxStaleness = w.viewers[0], w.viewers[1], w.countMismatches, w.maxCountAge
	if census {
		if err := w.census(e); err != nil {
			return err
		}
	}
	row.Wall = time.Since(w.wallStart)
	stats := w.stats
	row.Events, row.TruthChanges, row.Beats, row.Refused, row.RefusedExpected = stats.Events, stats.TruthChanges, stats.Beats, stats.Refused, stats.RefusedExpected
	row.Kicks, row.KicksExpected = stats.Kicks, stats.KicksExpected
	row.RedisTrips, row.ScriptCalls = w.store.trips.Load(), w.store.calls.Load()
	w.rows = append(w.rows, row)
	return nil
}

// checkCounts reads every video's count and compares it with the truth.
func (w *world) checkCounts(e *edge) error {
	w.lastCountCheck = w.now
	w.viewers = [2]int64{}
	w.countMismatches, w.maxCountAge = 0, 0
	allowed := videoSweep + w.cfg.SweepEvery + time.Duration(w.tickMS)*time.Millisecond
	for i := range w.videos {
		v := &w.videos[i]
		truthNow := v.samples[len(v.samples)-1].count
		count, err := opdo.Do[core.Count](w.ctx, e.engine, core.ReadCount{Scope: core.Scope{Class: videoClass, ID: v.id}})
		if err != nil {
			return fmt.Errorf("sim: count: %w", err)
		}
		w.stats.CountChecks++
		w.viewers[0] += truthNow
		w.viewers[1] += count.N
		stale, right := v.staleness(count.N, count.AsOf.UnixMilli(), w.now)
		w.maxCountAge = max(w.maxCountAge, stale)
		switch {
		case !right:
			w.countMismatches++
			w.stats.CountMismatch++
			w.violation("video %s: count %d as of %s, but the truth then was otherwise", v.id, count.N, count.AsOf.UTC().Format(time.TimeOnly))
		case stale > allowed:
			w.countMismatches++
			w.stats.CountMismatch++
			w.violation("video %s: count %d was last right %v ago, more than one sweep interval", v.id, count.N, stale)
		}
	}
	return nil
}

// census reads every user's status and compares it, and the states of
// the live devices, with the truth.
func (w *world) census(e *edge) error {
	ids := make([]string, 0, core.MaxBatch)
	for lo := 0; lo < len(w.users); lo += core.MaxBatch {
		hi := min(lo+core.MaxBatch, len(w.users))
		ids = ids[:0]
		for i := lo; i < hi; i++ {
			ids = append(ids, w.users[i].id)
		}
		statuses, err := opdo.Do[[]core.UserStatus](w.ctx, e.engine, core.ReadStatuses{Users: ids})
		if err != nil {
			return fmt.Errorf("sim: statuses: %w", err)
		}
		for j, st := range statuses {
			u := &w.users[lo+j]
			w.stats.Census++
			var want, got []string
			for _, di := range u.devices {
				d := &w.devices[di]
				if s := w.rules.state(&d.record, w.now); s != core.StatusOffline {
					want = append(want, d.id+":"+s.String())
				}
			}
			for _, dv := range st.Devices {
				got = append(got, dv.ID+":"+dv.State.String())
			}
			sortStrings(want)
			sortStrings(got)
			if st.Status != u.status || strings.Join(want, " ") != strings.Join(got, " ") {
				w.stats.CensusMismatch++
				w.violation("status of %s: engine %s [%s], truth %s [%s]", u.id, st.Status, strings.Join(got, " "),
					u.status, strings.Join(want, " "))
			}
		}
	}
	return nil
}
