package benchkit

import (
	"context"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
)

// StallPing is how often the stall workloads' other client PINGs the
// server (issue 23: "a PING every 10 ms from another client").
const StallPing = 10 * time.Millisecond

// TargetStallPingP99 is issue 23's goal: the p99 a PING waits while the
// engine sweeps or runs its largest batches, in µs.
const TargetStallPingP99 = 2000

// StallRow is what another client waited while one engine workload ran:
// PINGs every StallPing on a connection of their own, and the p99 and
// longest script call the server logged meanwhile (SLOWLOG: wall time, a
// stall of the server's process included).
type StallRow struct {
	Workload  string  `json:"workload"`
	Items     int     `json:"items"` // expired entries swept, or items a loop iteration
	Shards    int     `json:"shards,omitempty"`
	Ops       int     `json:"ops"` // sweep passes or loop iterations
	Seconds   float64 `json:"seconds"`
	Pings     int     `json:"pings"`
	P50Pingus float64 `json:"p50_ping_us"`
	P99Pingus float64 `json:"p99_ping_us"`
	MaxPingus float64 `json:"max_ping_us"`
	P99Callus float64 `json:"p99_call_us"`
	MaxCallus float64 `json:"max_call_us"`
	MaxCall   string  `json:"max_call"`
}

// stalls runs the stall workloads: Duration of nothing (the baseline),
// sweeps of StallDevices expired devices
// and of StallMembers expired members (exact, and compact with shards
// sized for them), then Statuses of 1,000 users and TouchBatch of 1,000
// into one scope in a loop for Duration.
func (r *runner) stalls(ctx context.Context) error {
	conn, err := Dial(ctx, AdapterGoRedis, r.s.URL, 4)
	if err != nil {
		return err
	}
	defer conn.Close()
	// what the PINGs wait with nothing else running: the host's own noise
	idle := StallRow{Workload: "nothing (baseline)"}
	err = r.stalled(ctx, &idle, func(ctx context.Context) (int, error) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(r.st.Duration):
			return 0, nil
		}
	})
	if err != nil {
		return err
	}
	r.rep.Stalls = append(r.rep.Stalls, idle)
	type sweep struct {
		kind   string
		n      int
		shards int
	}
	for _, s := range []sweep{{"users", r.st.StallDevices, 0}, {"scope-exact", r.st.StallMembers, 0},
		{"scope-compact", r.st.StallMembers, SizedShards(r.st.StallMembers)}} {
		if err := r.stallSweep(ctx, conn.Store, s.kind, s.n, s.shards); err != nil {
			return err
		}
	}
	return r.stallLoop(ctx, conn.Store)
}

// stallSweep fills a backlog of n entries, ages it past its window, and
// sweeps it while the other client PINGs.
func (r *runner) stallSweep(ctx context.Context, store core.Store, kind string, n, shards int) error {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	clk := NewVirtualClock(time.Now())
	cfg := core.Config{Prefix: r.prefix("stall-" + kind), Clock: clk.Now, KeyGrace: time.Hour, LeaveDelay: SweepLeaveDelay,
		Classes: BenchClasses(shards, r.st.ShardSize)}
	e, err := core.New(Quiet(store), cfg)
	if err != nil {
		return err
	}
	se, err := core.New(store, cfg)
	if err != nil {
		return err
	}
	r.logf("stall: filling %s with %d entries", kind, n)
	if err := fillBacklog(ctx, e, clk, kind, n); err != nil {
		return err
	}
	clk.Advance(11 * time.Minute)
	row := StallRow{Workload: "sweep " + kind, Items: n, Shards: shards}
	err = r.stalled(ctx, &row, func(ctx context.Context) (int, error) {
		if kind == "users" {
			_, _, _, err := sweepUsersBoth(ctx, se, clk)
			return 1, err
		}
		_, err := se.SweepScopes(ctx)
		return 1, err
	})
	if err != nil {
		return err
	}
	r.rep.Stalls = append(r.rep.Stalls, row)
	return nil
}

// stallLoop logs in 1,000 users, then runs Statuses of them all and a
// TouchBatch of 1,000 members into one exact and one compact scope, in a
// loop for Duration, while the other client PINGs.
func (r *runner) stallLoop(ctx context.Context, store core.Store) error {
	const n = core.MaxBatch
	cfg := core.Config{Prefix: r.prefix("stall-loop"), Classes: BenchClasses(0, r.st.ShardSize)}
	e, err := core.New(Quiet(store), cfg)
	if err != nil {
		return err
	}
	if _, err := Login(ctx, e, n, UserID); err != nil {
		return err
	}
	users := make([]string, n)
	exact := make([]core.ScopeTouch, n)
	compact := make([]core.ScopeTouch, n)
	for i := range users {
		users[i] = UserID(i)
		exact[i] = core.ScopeTouch{Scope: core.Scope{Class: ClassExact, ID: "10086"}, Member: MemberID(i)}
		compact[i] = core.ScopeTouch{Scope: core.Scope{Class: ClassCompact, ID: "10086"}, Member: MemberID(i)}
	}
	row := StallRow{Workload: "Statuses 1,000 + TouchBatch 1,000 (exact, compact)", Items: n}
	err = r.stalled(ctx, &row, func(ctx context.Context) (int, error) {
		ops := 0
		for t0 := time.Now(); time.Since(t0) < r.st.Duration; ops++ {
			if _, err := e.Statuses(ctx, users); err != nil {
				return ops, err
			}
			if err := e.TouchBatch(ctx, exact); err != nil {
				return ops, err
			}
			if err := e.TouchBatch(ctx, compact); err != nil {
				return ops, err
			}
		}
		return ops, nil
	})
	if err != nil {
		return err
	}
	r.rep.Stalls = append(r.rep.Stalls, row)
	return nil
}

// stalled runs work while another client PINGs every StallPing and the
// server logs its calls, and fills row with what the PINGs waited and the
// longest script call.
func (r *runner) stalled(ctx context.Context, row *StallRow, work func(context.Context) (int, error)) error {
	var read func(context.Context) ([]SlowlogEntry, error)
	var stop func() *Hist
	if !r.s.Miniredis {
		var err error
		if read, err = r.admin.StartSlowlog(ctx, SlowlogFloor, slowlogRoom); err != nil {
			return err
		}
		stop = r.admin.Probe(ctx, StallPing)
	}
	t0 := time.Now()
	ops, err := work(ctx)
	row.Seconds = round(time.Since(t0).Seconds(), 2)
	row.Ops = ops
	if read != nil {
		pings := stop()
		entries, rerr := read(ctx)
		if err == nil {
			err = rerr
		}
		row.Pings = int(pings.Count())
		row.P50Pingus, row.P99Pingus, row.MaxPingus = us(pings.Quantile(0.5)), us(pings.Quantile(0.99)), us(pings.Max())
		var calls Hist
		for _, en := range entries {
			if !strings.HasPrefix(en.Command, "eval") {
				continue
			}
			calls.Record(en.Duration)
			if us(en.Duration) > row.MaxCallus {
				row.MaxCallus, row.MaxCall = us(en.Duration), en.Command
			}
		}
		row.P99Callus = us(calls.Quantile(0.99))
	}
	if err != nil {
		return err
	}
	r.logf("stall: %s %d: %d ops in %.2f s, PING p50 %.0f µs p99 %.0f µs max %.0f µs (%d), call p99 %.0f µs, longest %.0f µs (%s)",
		row.Workload, row.Items, row.Ops, row.Seconds, row.P50Pingus, row.P99Pingus, row.MaxPingus, row.Pings, row.P99Callus, row.MaxCallus, row.MaxCall)
	return nil
}

// fillBacklog fills kind ("users", "scope-exact", "scope-compact") with
// n entries through e, whose clock is clk: n logged-in users whose ONLINE
// changes are published, or n members of one scope.
func fillBacklog(ctx context.Context, e *core.Engine, clk *VirtualClock, kind string, n int) error {
	switch kind {
	case "users":
		if _, err := Login(ctx, e, n, UserID); err != nil {
			return err
		}
		// publish the ONLINE changes, so that the sweep measured is the
		// one that finds the backlog expired
		clk.Advance(2 * time.Second)
		_, err := e.SweepUsers(ctx)
		return err
	case "scope-exact":
		return Fill(ctx, e, core.Scope{Class: ClassExact, ID: "10086"}, n, MemberID)
	default:
		return Fill(ctx, e, core.Scope{Class: ClassCompact, ID: "10086"}, n, MemberID)
	}
}
