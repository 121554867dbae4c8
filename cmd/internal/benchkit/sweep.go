package benchkit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

// sweepTimeout bounds one sweep workload (fill and sweep).
const sweepTimeout = 10 * time.Minute

// SweepLeaveDelay is the LeaveDelay of the sweep workloads' engines: the
// time between a user sweep's two visits of an expired device.
const SweepLeaveDelay = 15 * time.Second

// sweepUsersBoth runs the two user sweeps an expired device takes, the
// clock moved past SweepLeaveDelay between them: the first finds the device
// gone and leaves OFFLINE pending for the leave delay (docs/design.md §7),
// the second publishes OFFLINE and deletes the records. It returns the
// devices the first found, the steps of both, and their changes.
func sweepUsersBoth(ctx context.Context, se *core.Engine, clk *VirtualClock) (found, steps int, changes []core.Change, err error) {
	first, err := se.SweepUsers(ctx)
	if err != nil {
		return 0, 0, nil, err
	}
	clk.Advance(SweepLeaveDelay + time.Millisecond)
	second, err := se.SweepUsers(ctx)
	return first.Visited, first.Steps + second.Steps, append(first.Changes, second.Changes...), err
}

// slowlogRoom is the SLOWLOG length kept during a sweep: enough for every
// call of a 1,000,000-entry backlog.
const slowlogRoom = 200_000

// SlowlogFloor is the shortest call a sweep's SLOWLOG keeps. It leaves out
// the PUBLISH of each change (about 1 µs each, a million of them after a
// large user sweep would push the script calls out of the log) and the
// idle-bucket checks, and keeps every script step that does work.
const SlowlogFloor = 10 * time.Microsecond

// SizedShards returns the compact shard count that keeps n members at about
// 256 per shard (well inside the listpack limit of 512), at least 256.
func SizedShards(n int) int {
	s := 256
	for s*256 < n && s < 65536 {
		s *= 2
	}
	return s
}

func (r *runner) sweeps(ctx context.Context) error {
	conn, err := Dial(ctx, AdapterGoRedis, r.s.URL, 4)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, n := range r.st.Backlogs {
		if err := r.sweepOne(ctx, conn.Store, "users", n, 0); err != nil {
			return err
		}
		if err := r.sweepOne(ctx, conn.Store, "scope-exact", n, 0); err != nil {
			return err
		}
		// a self-sized compact scope: every member expired (a full pass),
		// 1 % of them, none (issue 23: a pass costs what expires)
		for _, pct := range []int{100, 1, 0} {
			if err := r.sweepOne(ctx, conn.Store, "scope-compact", n, pct); err != nil {
				return err
			}
		}
	}
	return nil
}

// sweepOne fills a backlog of n entries, ages it past its window with a
// virtual clock, and sweeps it with every call logged. Users take both
// visits of an expired device (sweepUsersBoth): the row's time and calls
// are those of both, so that it costs what a device's expiry costs. Of a
// compact scope's members, pct % are past their window (the rest were
// touched 5 minutes later, inside theirs).
func (r *runner) sweepOne(ctx context.Context, store core.Store, kind string, n, pct int) error {
	shards := 0
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	clk := NewVirtualClock(time.Now())
	// A long key grace keeps the backlog in Redis however long the fill
	// takes in real time: only the sweep may remove it.
	prefix := r.prefix("sweep-" + kind)
	cfg := core.Config{Prefix: prefix, Clock: clk.Now, KeyGrace: time.Hour, LeaveDelay: SweepLeaveDelay, Classes: BenchClasses(shards, r.st.ShardSize)}
	// The fill publishes nothing (a million ONLINE messages would dominate
	// it); the measured sweep publishes as an application's would.
	e, err := core.New(Quiet(store), cfg)
	if err != nil {
		return err
	}
	timed := NewTimedStore(store)
	se, err := core.New(timed, cfg)
	if err != nil {
		return err
	}
	r.logf("sweep: filling %s with %d entries", kind, n)
	t0 := time.Now()
	workload := kind
	if kind == "scope-compact" && pct < 100 {
		old := n * pct / 100
		sc := core.Scope{Class: ClassCompact, ID: "10086"}
		err = Fill(ctx, e, sc, old, MemberID)
		if err == nil {
			clk.Advance(5 * time.Minute)
			err = Fill(ctx, e, sc, n-old, func(i int) string { return MemberID(old + i) })
		}
		clk.Advance(5*time.Minute + time.Second) // past the window of the first ones only
		workload = fmt.Sprintf("%s %d%% expired", kind, pct)
	} else {
		err = fillBacklog(ctx, e, clk, kind, n)
		clk.Advance(11 * time.Minute) // past every window, the leave delay included
	}
	if err != nil {
		return err
	}
	fill := time.Since(t0)

	row := SweepRow{Workload: workload, Backlog: n, FillMillis: round(float64(fill.Microseconds())/1e3, 1)}
	if kind == "scope-compact" && !r.s.Miniredis {
		keys, err := r.compactShards(ctx, keyspace.New(prefix, 0, 0), core.Scope{Class: ClassCompact, ID: "10086"})
		if err != nil {
			return err
		}
		row.Shards = len(keys)
		enc, err := r.admin.Encodings(ctx, keys)
		if err != nil {
			return err
		}
		row.Encoding = mapString(enc)
	}
	var (
		read     func(context.Context) ([]SlowlogEntry, error)
		stopPing func() *Hist
	)
	if !r.s.Miniredis {
		if read, err = r.admin.StartSlowlog(ctx, SlowlogFloor, slowlogRoom); err != nil {
			return err
		}
		stopPing = r.admin.Probe(ctx, time.Millisecond)
	}
	var cpu0 time.Duration
	if !r.s.Miniredis {
		if cpu0, err = r.admin.ServerCPU(ctx); err != nil {
			return err
		}
	}
	t1 := time.Now()
	if kind == "users" {
		row.Removed, row.Steps, _, err = sweepUsersBoth(ctx, se, clk)
	} else {
		var rep core.SweepReport
		rep, err = se.SweepScopes(ctx)
		row.Removed, row.Steps = rep.Removed, rep.Steps
	}
	wall := time.Since(t1)
	evalT, pubT, rounds, published := timed.Stats()
	row.EvalMs = round(float64(evalT.Microseconds())/1e3, 1)
	row.PublishMs = round(float64(pubT.Microseconds())/1e3, 1)
	row.Rounds = int(rounds)
	row.Published = int(published)
	var (
		entries []SlowlogEntry
		pings   *Hist
	)
	if read != nil {
		pings = stopPing()
		var rerr error
		entries, rerr = read(ctx)
		if err == nil {
			err = rerr
		}
	}
	if err != nil {
		return err
	}
	if !r.s.Miniredis {
		cpu1, err := r.admin.ServerCPU(ctx)
		if err != nil {
			return err
		}
		row.ServerCPUms = round(float64((cpu1-cpu0).Microseconds())/1e3, 1)
	}
	row.WallMs = round(float64(wall.Microseconds())/1e3, 1)
	if entries != nil {
		row.Truncated = len(entries) >= slowlogRoom
		var h Hist
		var longest SlowlogEntry
		for _, en := range entries {
			if !strings.HasPrefix(en.Command, "eval") {
				continue
			}
			h.Record(en.Duration)
			if en.Duration > longest.Duration {
				longest = en
			}
		}
		row.Calls = int(h.Count())
		row.MaxCallus = us(h.Max())
		row.P99Callus = us(h.Quantile(0.99))
		row.MaxCall = longest.Command
		row.MaxPingus = us(pings.Max())
		row.P99Pingus = us(pings.Quantile(0.99))
	}
	r.rep.Sweeps = append(r.rep.Sweeps, row)
	r.logf("sweep: %s %d shards %d: removed %d in %.1f ms wall, %d calls, longest %.0f µs (%s), max ping %.0f µs",
		kind, n, shards, row.Removed, row.WallMs, row.Calls, row.MaxCallus, row.MaxCall, row.MaxPingus)
	return nil
}
