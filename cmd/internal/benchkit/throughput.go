package benchkit

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/presencekit/presence/adapters/batcher"
	"github.com/presencekit/presence/core"
)

// StatusesBatch is the number of users of one batched status read (a
// friend list at start-up).
const StatusesBatch = 100

// scopesPerClass is the number of scopes the touch and count workloads
// spread over.
const scopesPerClass = 100

// Measure runs op under load and returns its row: this process's CPU time
// and heap allocations per item, and the server's per-item CPU time and
// command costs (INFO deltas) when admin is not nil, and its instructions
// per item when admin counts them.
func Measure(ctx context.Context, admin *Admin, workload, adapter string, batch int, load Load, op Op) (ThroughputRow, error) {
	var (
		before map[string]CommandStat
		cpu0   time.Duration
		instr0 int64
	)
	if admin != nil {
		var err error
		if before, err = admin.CommandStats(ctx); err != nil {
			return ThroughputRow{}, err
		}
		if cpu0, err = admin.ServerCPU(ctx); err != nil {
			return ThroughputRow{}, err
		}
		if admin.instr != nil {
			if instr0, err = admin.instr(ctx); err != nil {
				return ThroughputRow{}, err
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs0 := ms.Mallocs
	ccpu0, cok := ProcessCPU()
	res, err := Run(ctx, load, op)
	ccpu1, _ := ProcessCPU()
	runtime.ReadMemStats(&ms)
	if err != nil {
		return ThroughputRow{}, fmt.Errorf("%s through %s: %w", workload, adapter, err)
	}
	row := NewThroughputRow(workload, adapter, load.withDefaults().Concurrency, batch, &res)
	items := float64(max(res.Items, 1))
	if cok {
		row.ClientCPUus = round(float64((ccpu1-ccpu0).Nanoseconds())/1e3/items, 2)
	}
	row.ClientAllocs = round(float64(ms.Mallocs-mallocs0)/items, 1)
	if admin != nil && admin.instr != nil {
		instr1, err := admin.instr(ctx)
		if err != nil {
			return ThroughputRow{}, err
		}
		row.ServerInstr = round(float64(instr1-instr0)/float64(max(res.Items, 1)), 0)
	}
	if admin != nil {
		cpu1, err := admin.ServerCPU(ctx)
		if err != nil {
			return ThroughputRow{}, err
		}
		row.ServerCPUus = round(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(max(res.Items, 1)), 2)
		after, err := admin.CommandStats(ctx)
		if err != nil {
			return ThroughputRow{}, err
		}
		row.Commands = DiffCommands(before, after, res.Items)
		if len(row.Commands) > 8 {
			row.Commands = row.Commands[:8]
		}
	}
	return row, nil
}

func (r *runner) throughput(ctx context.Context) error {
	for _, name := range r.st.Adapters {
		if err := r.throughputOf(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) throughputOf(ctx context.Context, adapter string) error {
	conn, err := Dial(ctx, adapter, r.s.URL, max(r.st.Concurrency, r.st.BatchConcurrency))
	if err != nil {
		return err
	}
	defer conn.Close()
	// LastGoodCounts -1: a count the engine remembers and serves when Redis
	// fails (Count.Stale) is no read of Redis; it must fail the row.
	cfg := core.Config{Prefix: r.prefix(adapter), Classes: BenchClasses(0, 0), LastGoodCounts: -1}
	e, err := NewEngine(ctx, conn.Store, cfg, r.st.Clock)
	if err != nil {
		return err
	}
	n := r.st.Users
	users := make([]string, n)
	members := make([]string, n)
	for i := range users {
		users[i], members[i] = UserID(i), MemberID(i)
	}
	r.logf("%s: logging %d users in", adapter, n)
	tokens, err := Login(ctx, e, n, func(i int) string { return users[i] })
	if err != nil {
		return err
	}
	if err := Warm(ctx, e, users, tokens, func(int) string { return "d0" }); err != nil {
		return err
	}
	single := Load{Concurrency: r.st.Concurrency, Duration: r.st.Duration}
	batched := Load{Concurrency: r.st.BatchConcurrency, Duration: r.st.Duration}
	pick := func(seq int) int { return int(uint64(seq) * 7919 % uint64(n)) }
	add := func(workload string, batch int, load Load, op Op) error {
		row, err := Measure(ctx, r.adminFor(), workload, adapter, batch, load, op)
		if err != nil {
			return err
		}
		r.logf("%-22s %-8s %10.0f items/s  p50 %7.0f µs  p99 %7.0f µs", workload, adapter, row.ItemsPerSec, row.P50us, row.P99us)
		r.rep.Throughput = append(r.rep.Throughput, row)
		return nil
	}

	err = add("heartbeat", 1, single, func(ctx context.Context, _, seq int) (int, error) {
		u := pick(seq)
		_, err := e.Heartbeat(ctx, core.Heartbeat{User: users[u], Device: "d0", Kind: core.KindWeb, Token: tokens[u], Active: true})
		return 1, err
	})
	if err != nil {
		return err
	}
	// the same single beats from the same workers, merged by a batcher
	bt, err := batcher.New(e, batcher.Config{})
	if err != nil {
		return err
	}
	err = add("heartbeat-batcher", 1, single, func(ctx context.Context, _, seq int) (int, error) {
		u := pick(seq)
		_, err := bt.Heartbeat(ctx, core.Heartbeat{User: users[u], Device: "d0", Kind: core.KindWeb, Token: tokens[u], Active: true})
		return 1, err
	})
	bt.Close()
	if err != nil {
		return err
	}
	beats := make([][]core.Heartbeat, batched.Concurrency)
	for w := range beats {
		beats[w] = make([]core.Heartbeat, r.st.Batch)
	}
	err = add("heartbeat-batch", r.st.Batch, batched, func(ctx context.Context, w, seq int) (int, error) {
		b := beats[w]
		for j := range b {
			u := (seq*len(b) + j) % n
			b[j] = core.Heartbeat{User: users[u], Device: "d0", Kind: core.KindWeb, Token: tokens[u], Active: true}
		}
		acks, err := e.HeartbeatBatch(ctx, b)
		if err == nil {
			for _, a := range acks {
				if a.Err != nil {
					return 0, a.Err
				}
			}
		}
		return len(b), err
	})
	if err != nil {
		return err
	}
	err = add("status", 1, single, func(ctx context.Context, _, seq int) (int, error) {
		_, err := e.Status(ctx, users[pick(seq)])
		return 1, err
	})
	if err != nil {
		return err
	}
	err = add("statuses", StatusesBatch, single, func(ctx context.Context, _, seq int) (int, error) {
		lo := seq * StatusesBatch % (n - StatusesBatch + 1)
		_, err := e.Statuses(ctx, users[lo:lo+StatusesBatch])
		return StatusesBatch, err
	})
	if err != nil {
		return err
	}
	touches := make([][]core.ScopeTouch, batched.Concurrency)
	for w := range touches {
		touches[w] = make([]core.ScopeTouch, r.st.Batch)
	}
	for _, lc := range LayoutClasses() {
		layout, class := lc[0], lc[1]
		scopes := make([]core.Scope, scopesPerClass)
		for i := range scopes {
			scopes[i] = core.Scope{Class: class, ID: "s" + strconv.Itoa(i)}
		}
		err = add("touch-"+layout, 1, single, func(ctx context.Context, _, seq int) (int, error) {
			return 1, e.Touch(ctx, scopes[seq%scopesPerClass], members[pick(seq)])
		})
		if err != nil {
			return err
		}
		err = add("touch-batch-"+layout, r.st.Batch, batched, func(ctx context.Context, w, seq int) (int, error) {
			t := touches[w]
			for j := range t {
				k := seq*len(t) + j
				t[j] = core.ScopeTouch{Scope: scopes[k%scopesPerClass], Member: members[pick(k)]}
			}
			return len(t), e.TouchBatch(ctx, t)
		})
		if err != nil {
			return err
		}
		// before its first sweep a compact count sums the shards: not the
		// hot path
		if err := SweepAhead(ctx, conn.Store, cfg); err != nil {
			return err
		}
		err = add("count-"+layout, 1, single, func(ctx context.Context, _, seq int) (int, error) {
			_, err := e.Count(ctx, scopes[seq%scopesPerClass])
			return 1, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// adminFor returns the admin whose command statistics are worth reading:
// none on miniredis, which has no INFO commandstats.
func (r *runner) adminFor() *Admin {
	if r.s.Miniredis {
		return nil
	}
	return r.admin
}
