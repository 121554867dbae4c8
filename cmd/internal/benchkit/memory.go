package benchkit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

func (r *runner) memory(ctx context.Context) error {
	if r.s.Miniredis {
		r.logf("memory: skipped on miniredis (no real memory accounting)")
		return nil
	}
	conn, err := Dial(ctx, AdapterGoRedis, r.s.URL, 4)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := r.warmScripts(ctx, conn.Store); err != nil {
		return err
	}

	n := r.st.MemoryItems
	if err := r.memoryUsers(ctx, conn.Store, n); err != nil {
		return err
	}
	shards := 0 // compact scopes size themselves (ScopeClass.ShardSize)
	for _, v := range []struct {
		name   string
		class  string
		n      int
		member func(int) string
	}{
		{"scope-compact", ClassCompact, n, MemberID},
		{"scope-compact", ClassCompact, 1000, MemberID},
		{"scope-compact-string-ids", ClassCompact, n, UserID},
		{"scope-exact", ClassExact, n, MemberID},
		{"scope-approx", ClassApprox, n, MemberID},
	} {
		if err := r.memoryScope(ctx, conn.Store, v.name, v.class, shards, v.n, v.member); err != nil {
			return err
		}
	}
	return nil
}

// compact runs the compact scope rows of the memory group (MemoryItems
// and 1,000 members) and of the sweep group (each backlog: every member,
// 1 % and none expired).
func (r *runner) compact(ctx context.Context) error {
	conn, err := Dial(ctx, AdapterGoRedis, r.s.URL, 4)
	if err != nil {
		return err
	}
	defer conn.Close()
	if !r.s.Miniredis {
		if err := r.warmScripts(ctx, conn.Store); err != nil {
			return err
		}
		for _, n := range []int{r.st.MemoryItems, 1000} {
			if err := r.memoryScope(ctx, conn.Store, "scope-compact", ClassCompact, 0, n, MemberID); err != nil {
				return err
			}
		}
	}
	for _, n := range r.st.Backlogs {
		for _, pct := range []int{100, 1, 0} {
			if err := r.sweepOne(ctx, conn.Store, "scope-compact", n, pct); err != nil {
				return err
			}
		}
	}
	return nil
}

// warmScripts loads every script once, on a prefix of its own, so that
// the script cache is not part of any memory delta.
func (r *runner) warmScripts(ctx context.Context, store core.Store) error {
	warm, err := core.New(store, core.Config{Prefix: r.prefix("warm"), Classes: BenchClasses(0, 0)})
	if err != nil {
		return err
	}
	if _, err := Login(ctx, warm, 1, UserID); err != nil {
		return err
	}
	for _, lc := range LayoutClasses() {
		sc := core.Scope{Class: lc[1], ID: "w"}
		if err := warm.Touch(ctx, sc, "1"); err != nil {
			return err
		}
		if _, err := warm.Count(ctx, sc); err != nil {
			return err
		}
	}
	if _, err := warm.SweepUsers(ctx); err != nil {
		return err
	}
	_, err = warm.SweepScopes(ctx)
	return err
}

// compactShards names the shards a self-sized compact scope has now, as
// its meta says (2^L + s of them), the engine's keys being keys.
func (r *runner) compactShards(ctx context.Context, keys keyspace.Layout, sc core.Scope) ([]string, error) {
	v, err := r.admin.Client().HMGet(ctx, keys.CompactMeta(sc.Class, sc.ID), "L", "s").Result()
	if err != nil {
		return nil, err
	}
	level, _ := strconv.Atoi(fmt.Sprint(v[0]))
	split, _ := strconv.Atoi(fmt.Sprint(v[1]))
	shards := make([]string, 1<<level+split)
	for i := range shards {
		shards[i] = keys.Shard(sc.Class, sc.ID, i)
	}
	return shards, nil
}

// settleMemory returns the data memory and key count once steady.
func (r *runner) settleMemory(ctx context.Context) (int64, int64, error) {
	return r.admin.SteadyMemory(ctx)
}

func (r *runner) memoryUsers(ctx context.Context, store core.Store, n int) error {
	prefix := r.memoryPrefix()
	clk := NewVirtualClock(time.Now())
	e, err := core.New(Quiet(store), core.Config{Prefix: prefix, Clock: clk.Now})
	if err != nil {
		return err
	}
	before, keys0, err := r.settleMemory(ctx)
	if err != nil {
		return err
	}
	r.logf("memory: logging %d users in, one device each", n)
	if _, err := Login(ctx, e, n, UserID); err != nil {
		return err
	}
	// Past the coalescing window, a sweep publishes the ONLINE changes: the
	// steady state of a user who stays online.
	clk.Advance(2 * time.Second)
	if _, err := e.SweepUsers(ctx); err != nil {
		return err
	}
	after, keys1, err := r.settleMemory(ctx)
	if err != nil {
		return err
	}
	row := MemoryRow{Workload: "user-device", Items: n, Bytes: after - before, Keys: int(keys1 - keys0),
		BytesPerItem: round(float64(after-before)/float64(n), 1), SampleBytes: map[string]int64{}}
	keys := keyspace.New(prefix, 0, 0)
	var sample []string
	for b := range keys.UserBuckets {
		sample = append(sample, keys.Big(b), keys.Due(b))
		// the pages there are (linear hashing: their number follows the users)
		for n := range 4096 {
			sample = append(sample, keys.Page(b, n))
		}
	}
	if row.Encodings, err = r.admin.Encodings(ctx, sample); err != nil {
		return err
	}
	delete(row.Encodings, "missing")
	sizes, err := r.admin.MemoryUsage(ctx, []string{keys.Page(0, 0), keys.Due(0), keys.Big(0)})
	if err != nil {
		return err
	}
	row.SampleBytes["page_key"] = sizes[0]
	row.SampleBytes["due_index"] = sizes[1]
	row.SampleBytes["big_hash"] = sizes[2]
	row.Note = "one web device per user, ONLINE, after the coalescing sweep; encodings of every user page, big hash and due index; MEMORY USAGE of bucket 0's first page, due index and big hash"
	r.rep.Memory = append(r.rep.Memory, row)
	r.logf("memory: %s %.1f bytes/item", row.Workload, row.BytesPerItem)
	return nil
}

func (r *runner) memoryScope(ctx context.Context, store core.Store, name, class string, shards, n int, member func(int) string) error {
	prefix := r.memoryPrefix()
	clk := NewVirtualClock(time.Now())
	e, err := core.New(store, core.Config{Prefix: prefix, Clock: clk.Now, Classes: BenchClasses(shards, r.st.ShardSize)})
	if err != nil {
		return err
	}
	sc := core.Scope{Class: class, ID: "10086"}
	before, keys0, err := r.settleMemory(ctx)
	if err != nil {
		return err
	}
	if err := Fill(ctx, e, sc, n, member); err != nil {
		return err
	}
	if _, err := e.Count(ctx, sc); err != nil {
		return err
	}
	after, keys1, err := r.settleMemory(ctx)
	if err != nil {
		return err
	}
	row := MemoryRow{Workload: name, Items: n, Bytes: after - before, Keys: int(keys1 - keys0),
		BytesPerItem: round(float64(after-before)/float64(n), 1)}
	switch class {
	case ClassCompact:
		keys, err := r.compactShards(ctx, keyspace.New(prefix, 0, 0), sc)
		if err != nil {
			return err
		}
		if row.Encodings, err = r.admin.Encodings(ctx, keys); err != nil {
			return err
		}
		row.Note = "member IDs like " + member(0) + "; " + strconv.Itoa(len(keys)) + " shards (self-sized), meta and due index included"
	case ClassExact:
		key := keyspace.New(prefix, 0, 0).Exact(sc.Class, sc.ID)
		if row.Encodings, err = r.admin.Encodings(ctx, []string{key}); err != nil {
			return err
		}
		row.Note = "member IDs like " + member(0)
	default:
		row.Note = "HyperLogLog per bucket: constant memory, per-item figure falls with the member count"
	}
	r.rep.Memory = append(r.rep.Memory, row)
	r.logf("memory: %s %.1f bytes/item %v", row.Workload, row.BytesPerItem, row.Encodings)
	return nil
}
