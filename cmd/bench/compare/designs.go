package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"time"

	"github.com/centrifugal/centrifuge"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/batcher"
	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/core"
)

// comparison is one run in progress.
type comparison struct {
	o     options
	admin *benchkit.Admin
	addr  string
	log   io.Writer
	run   string
	seq   int
	rep   *Report

	users, clients []string
	conns          map[string]*benchkit.Conn
	plain          *redis.Client
	cnode          *centrifuge.Node
	cpm            *centrifuge.RedisPresenceManager
	cshard         *centrifuge.RedisShard
}

func (c *comparison) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "compare: "+format+"\n", args...)
}

func (c *comparison) prefix(name string) string {
	c.seq++
	return c.run + "." + strconv.Itoa(c.seq) + "." + name
}

// ClientID returns the i-th client ID: UUID-shaped, as Centrifuge issues
// them, and used as the device ID of every design.
func ClientID(i int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919)
}

func (c *comparison) setup(ctx context.Context) error {
	n := max(c.o.users, c.o.memoryItems, c.o.room)
	c.users, c.clients = make([]string, n), make([]string, n)
	for i := range c.users {
		c.users[i], c.clients[i] = benchkit.UserID(i), ClientID(i)
	}
	c.conns = map[string]*benchkit.Conn{}
	for _, a := range c.o.adapters {
		conn, err := benchkit.Dial(ctx, a, "redis://"+c.addr, max(c.o.concurrency, c.o.batchConc))
		if err != nil {
			return err
		}
		c.conns[a] = conn
	}
	c.plain = redis.NewClient(&redis.Options{Addr: c.addr, PoolSize: max(c.o.concurrency, c.o.batchConc) + 2})
	var err error
	c.cnode, c.cpm, c.cshard, err = centrifugeNode(c.addr, c.prefix("centrifuge"))
	return err
}

func (c *comparison) close() {
	for _, conn := range c.conns {
		conn.Close()
	}
	if c.plain != nil {
		_ = c.plain.Close()
	}
	if c.cshard != nil {
		c.cshard.Close()
	}
}

// design is one way of recording beats.
type design struct {
	name string
	// beat records user u's beat.
	beat func(ctx context.Context, u int) error
	// batch records the beats of users us in one round trip; nil where the
	// design's API has no batch.
	batch func(ctx context.Context, us []int) error
	// hb is user u's beat, for the engine's designs.
	hb func(u int) core.Heartbeat
}

// engineDesign is the engine through one adapter, its users logged in
// (and, when warm, beaten once more past the coalescing window, so that
// beats measure users who stay online).
func (c *comparison) engineDesign(ctx context.Context, adapter string, e *core.Engine, n int, warm bool) (design, error) {
	tokens := make([]string, n)
	beats := make([]core.Heartbeat, 0, core.MaxBatch)
	for lo := 0; lo < n; lo += core.MaxBatch {
		beats = beats[:0]
		for i := lo; i < min(lo+core.MaxBatch, n); i++ {
			beats = append(beats, core.Heartbeat{User: c.users[i], Device: c.clients[i], Kind: core.KindWeb, Active: true})
		}
		acks, err := e.HeartbeatBatch(ctx, beats)
		if err != nil {
			return design{}, err
		}
		for j, a := range acks {
			if a.Err != nil {
				return design{}, a.Err
			}
			tokens[lo+j] = a.Token
		}
	}
	if warm {
		if err := benchkit.Warm(ctx, e, c.users[:n], tokens, func(i int) string { return c.clients[i] }); err != nil {
			return design{}, err
		}
	}
	hb := func(u int) core.Heartbeat {
		return core.Heartbeat{User: c.users[u], Device: c.clients[u], Kind: core.KindWeb, Token: tokens[u], Active: true}
	}
	return design{
		name: "engine/" + adapter,
		hb:   hb,
		beat: func(ctx context.Context, u int) error {
			_, err := e.Heartbeat(ctx, hb(u))
			return err
		},
		batch: func(ctx context.Context, us []int) error {
			b := make([]core.Heartbeat, len(us))
			for j, u := range us {
				b[j] = hb(u)
			}
			acks, err := e.HeartbeatBatch(ctx, b)
			if err != nil {
				return err
			}
			for _, a := range acks {
				if a.Err != nil {
					return a.Err
				}
			}
			return nil
		},
	}, nil
}

// centrifugeDesign maps user presence onto Centrifuge: one personal
// channel per user, the device as its client.
func (c *comparison) centrifugeDesign(pm *centrifuge.RedisPresenceManager) design {
	return design{
		name: "centrifuge",
		beat: func(_ context.Context, u int) error {
			return pm.AddPresence("user:"+c.users[u], c.clients[u], &centrifuge.ClientInfo{ClientID: c.clients[u], UserID: c.users[u]})
		},
	}
}

// plainSetDesign is the plain design most presence tutorials start from: per beat, ZADD the user to
// an online set scored by time, SETEX the device's status, and HSET the
// device into the user's device hash, pipelined.
func (c *comparison) plainSetDesign(prefix string) design {
	add := func(ctx context.Context, p redis.Pipeliner, u int) {
		now := time.Now().UnixMilli()
		val := "web|gw1|" + strconv.FormatInt(now, 10)
		p.ZAdd(ctx, prefix+":online", redis.Z{Score: float64(now), Member: c.users[u]})
		p.SetEx(ctx, prefix+":dev:"+c.users[u]+":"+c.clients[u], val, time.Minute)
		p.HSet(ctx, prefix+":user:"+c.users[u], c.clients[u], val)
	}
	return design{
		name: "plain zadd+setex+hset",
		beat: func(ctx context.Context, u int) error {
			p := c.plain.Pipeline()
			add(ctx, p, u)
			_, err := p.Exec(ctx)
			return err
		},
		batch: func(ctx context.Context, us []int) error {
			p := c.plain.Pipeline()
			for _, u := range us {
				add(ctx, p, u)
			}
			_, err := p.Exec(ctx)
			return err
		},
	}
}

// plainHashDesign is the other common plain design: one HSET user → last
// beat per beat, into one of 16 hashes by a hash of the user.
func (c *comparison) plainHashDesign(prefix string) design {
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = prefix + ":online:" + strconv.Itoa(i)
	}
	key := func(u string) string {
		h := fnv.New32a()
		h.Write([]byte(u))
		return keys[h.Sum32()%16]
	}
	return design{
		name: "plain hset×16",
		beat: func(ctx context.Context, u int) error {
			return c.plain.HSet(ctx, key(c.users[u]), c.users[u], time.Now().UnixMilli()).Err()
		},
		batch: func(ctx context.Context, us []int) error {
			p := c.plain.Pipeline()
			now := time.Now().UnixMilli()
			for _, u := range us {
				p.HSet(ctx, key(c.users[u]), c.users[u], now)
			}
			_, err := p.Exec(ctx)
			return err
		},
	}
}

// warm beats users 0..n-1 once through d.
func (c *comparison) warm(ctx context.Context, d design, n int) error {
	us := make([]int, 0, core.MaxBatch)
	for lo := 0; lo < n; lo += core.MaxBatch {
		us = us[:0]
		for i := lo; i < min(lo+core.MaxBatch, n); i++ {
			us = append(us, i)
		}
		if d.batch != nil {
			if err := d.batch(ctx, us); err != nil {
				return err
			}
			continue
		}
		for _, u := range us {
			if err := d.beat(ctx, u); err != nil {
				return err
			}
		}
	}
	return nil
}

// pick spreads sequence numbers over n users.
func pick(seq, n int) int { return int(uint64(seq) * 7919 % uint64(n)) }

func (c *comparison) throughput(ctx context.Context) error {
	n := c.o.users
	var designs []design
	for _, a := range c.o.adapters {
		prefix := c.prefix("engine-" + a)
		e, err := benchkit.NewEngine(ctx, c.conns[a].Store, core.Config{Prefix: prefix, UserBuckets: c.o.userBuckets, GroupCommit: c.o.groupCommit}, c.o.clock)
		if err != nil {
			return err
		}
		c.logf("engine/%s: logging %d users in", a, n)
		d, err := c.engineDesign(ctx, a, e, n, true)
		if err != nil {
			return err
		}
		designs = append(designs, d)
		// the same keys through an engine without group commit, one
		// call a beat as before it (GroupCommit -1)
		solo, err := benchkit.NewEngine(ctx, c.conns[a].Store, core.Config{Prefix: prefix, UserBuckets: c.o.userBuckets, GroupCommit: -1}, c.o.clock)
		if err != nil {
			return err
		}
		designs = append(designs, design{
			name: d.name + " solo",
			beat: func(ctx context.Context, u int) error {
				_, err := solo.Heartbeat(ctx, d.hb(u))
				return err
			},
		})
		// the same engine behind a batcher: single beats from many
		// goroutines, merged into batch calls
		bt, err := batcher.New(e, batcher.Config{})
		if err != nil {
			return err
		}
		defer bt.Close()
		designs = append(designs, design{
			name: d.name + "+batcher",
			beat: func(ctx context.Context, u int) error {
				_, err := bt.Heartbeat(ctx, d.hb(u))
				return err
			},
		})
	}
	others := []design{c.centrifugeDesign(c.cpm), c.plainSetDesign(c.prefix("plain-set")), c.plainHashDesign(c.prefix("plain-hash"))}
	for _, d := range others {
		// every user's keys exist before the run, as the engine's do
		if err := c.warm(ctx, d, n); err != nil {
			return err
		}
	}
	designs = append(designs, others...)
	single := benchkit.Load{Concurrency: c.o.concurrency, Duration: c.o.duration}
	batched := benchkit.Load{Concurrency: c.o.batchConc, Duration: c.o.duration}
	add := func(row benchkit.ThroughputRow, err error) error {
		if err != nil {
			return err
		}
		c.logf("%-24s %-16s %10.0f /s  p50 %6.0f µs  p99 %6.0f µs  %.2f µs CPU  %.0f instructions", row.Adapter, row.Workload, row.ItemsPerSec, row.P50us, row.P99us, row.ServerCPUus, row.ServerInstr)
		row.Commands = nil
		c.rep.Throughput = append(c.rep.Throughput, row)
		return nil
	}
	for _, d := range designs {
		err := add(benchkit.Measure(ctx, c.admin, "beat", d.name, 1, single, func(ctx context.Context, _, seq int) (int, error) {
			return 1, d.beat(ctx, pick(seq, n))
		}))
		if err != nil {
			return err
		}
	}
	for _, d := range designs {
		if d.batch == nil {
			continue
		}
		idx := make([][]int, batched.Concurrency)
		for w := range idx {
			idx[w] = make([]int, c.o.batch)
		}
		err := add(benchkit.Measure(ctx, c.admin, "beat batch", d.name, c.o.batch, batched, func(ctx context.Context, w, seq int) (int, error) {
			us := idx[w]
			for j := range us {
				us[j] = (seq*len(us) + j) % n
			}
			return len(us), d.batch(ctx, us)
		}))
		if err != nil {
			return err
		}
	}
	return c.reads(ctx, single, add)
}

// reads compares counting a room of c.o.room members.
func (c *comparison) reads(ctx context.Context, load benchkit.Load, add func(benchkit.ThroughputRow, error) error) error {
	m := c.o.room
	type reader struct {
		name, workload string
		read           func(ctx context.Context) error
	}
	var readers []reader
	for _, a := range c.o.adapters {
		// LastGoodCounts -1: a count the engine remembers and serves when
		// Redis fails (Count.Stale) is no read of Redis; it must fail the
		// row, not swell it.
		e, err := benchkit.NewEngine(ctx, c.conns[a].Store, core.Config{Prefix: c.prefix("room-" + a), Classes: benchkit.BenchClasses(0, 0), LastGoodCounts: -1}, c.o.clock)
		if err != nil {
			return err
		}
		for _, lc := range [][2]string{{"exact", benchkit.ClassExact}, {"compact", benchkit.ClassCompact}} {
			sc := core.Scope{Class: lc[1], ID: "888"}
			if err := benchkit.Fill(ctx, e, sc, m, func(i int) string { return c.users[i] }); err != nil {
				return err
			}
			if _, err := e.Count(ctx, sc); err != nil {
				return err
			}
			readers = append(readers, reader{"engine/" + a, "count " + lc[0], func(ctx context.Context) error {
				_, err := e.Count(ctx, sc)
				return err
			}})
		}
	}
	ch := "room:888"
	for i := 0; i < m; i++ {
		if err := c.cpm.AddPresence(ch, c.clients[i], &centrifuge.ClientInfo{ClientID: c.clients[i], UserID: c.users[i]}); err != nil {
			return err
		}
	}
	readers = append(readers, reader{"centrifuge", "PresenceStats", func(context.Context) error {
		_, err := c.cpm.PresenceStats(ch)
		return err
	}})
	zkey := c.prefix("plain-room") + ":online"
	p := c.plain.Pipeline()
	now := float64(time.Now().UnixMilli())
	for i := 0; i < m; i++ {
		p.ZAdd(ctx, zkey, redis.Z{Score: now, Member: c.users[i]})
	}
	if _, err := p.Exec(ctx); err != nil {
		return err
	}
	readers = append(readers, reader{"plain zadd+setex+hset", "count (ZCOUNT)", func(ctx context.Context) error {
		since := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
		return c.plain.ZCount(ctx, zkey, since, "+inf").Err()
	}})
	for _, r := range readers {
		err := add(benchkit.Measure(ctx, c.admin, r.workload+" of "+strconv.Itoa(m), r.name, 1, load, func(ctx context.Context, _, _ int) (int, error) {
			return 1, r.read(ctx)
		}))
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *comparison) memory(ctx context.Context) error {
	n := c.o.memoryItems
	us := make([]int, 0, core.MaxBatch)
	fill := func(batch func(context.Context, []int) error, one func(context.Context, int) error) error {
		for lo := 0; lo < n; lo += core.MaxBatch {
			us = us[:0]
			for i := lo; i < min(lo+core.MaxBatch, n); i++ {
				us = append(us, i)
			}
			if batch != nil {
				if err := batch(ctx, us); err != nil {
					return err
				}
				continue
			}
			for _, u := range us {
				if err := one(ctx, u); err != nil {
					return err
				}
			}
		}
		return nil
	}
	measure := func(name, prefix string, do func() error) error {
		defer c.unlinkPrefix(ctx, prefix)
		b0, k0, err := c.admin.SteadyMemory(ctx)
		if err != nil {
			return err
		}
		if err := do(); err != nil {
			return err
		}
		b1, k1, err := c.admin.SteadyMemory(ctx)
		if err != nil {
			return err
		}
		row := benchkit.MemoryRow{Workload: name, Items: n, Bytes: b1 - b0, Keys: int(k1 - k0),
			BytesPerItem: float64(int64(float64(b1-b0)/float64(n)*10+0.5)) / 10}
		c.logf("memory: %-24s %.1f bytes/device", name, row.BytesPerItem)
		c.rep.Memory = append(c.rep.Memory, row)
		return nil
	}
	// warm the script caches of every design first
	clk := benchkit.NewVirtualClock(time.Now())
	warm, err := core.New(c.conns[benchkit.AdapterGoRedis].Store, core.Config{Prefix: c.prefix("warm"), Clock: clk})
	if err != nil {
		return err
	}
	if _, err := benchkit.Login(ctx, warm, 1, benchkit.UserID); err != nil {
		return err
	}
	if _, err := warm.SweepUsers(ctx); err != nil {
		return err
	}
	if err := c.cpm.AddPresence("warm", "w", &centrifuge.ClientInfo{ClientID: "w", UserID: "w"}); err != nil {
		return err
	}
	ep := c.prefix("mem-engine")
	e, err := core.New(benchkit.Quiet(c.conns[benchkit.AdapterGoRedis].Store), core.Config{Prefix: ep, Clock: clk, UserBuckets: c.o.userBuckets})
	if err != nil {
		return err
	}
	err = measure("engine", ep, func() error {
		if _, err := c.engineDesign(ctx, "goredis", e, n, false); err != nil {
			return err
		}
		clk.Advance(2 * time.Second)
		_, err := e.SweepUsers(ctx)
		return err
	})
	if err != nil {
		return err
	}
	cp := c.prefix("mem-centrifuge")
	_, pm, shard, err := centrifugeNode(c.addr, cp)
	if err != nil {
		return err
	}
	defer shard.Close()
	if err := measure("centrifuge", cp, func() error { return fill(nil, c.centrifugeDesign(pm).beat) }); err != nil {
		return err
	}
	sp := c.prefix("mem-plain-set")
	if err := measure("plain zadd+setex+hset", sp, func() error { return fill(c.plainSetDesign(sp).batch, nil) }); err != nil {
		return err
	}
	hp := c.prefix("mem-plain-hash")
	return measure("plain hset×16", hp, func() error { return fill(c.plainHashDesign(hp).batch, nil) })
}

// unlinkPrefix removes the keys under prefix (SCAN and UNLINK, bounded):
// this tool's own keys on its own throwaway server, never the library's
// way of working.
func (c *comparison) unlinkPrefix(ctx context.Context, prefix string) {
	var cursor uint64
	for range 100_000 {
		keys, next, err := c.plain.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return
		}
		if len(keys) > 0 {
			c.plain.Unlink(ctx, keys...)
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

func (c *comparison) targets() []benchkit.TargetRow {
	rate, cpu := map[string]float64{}, map[string]float64{}
	for _, t := range c.rep.Throughput {
		if t.Workload == "beat" {
			rate[t.Adapter], cpu[t.Adapter] = t.ItemsPerSec, t.ServerCPUus
		}
	}
	cf := rate["centrifuge"]
	if cf == 0 {
		return nil
	}
	var out []benchkit.TargetRow
	for _, a := range c.o.adapters {
		for _, via := range []string{"", " solo", "+batcher"} {
			name := "engine/" + a + via
			if rate[name] == 0 {
				continue
			}
			r := rate[name] / cf
			note := fmt.Sprintf("%.0f vs %.0f beats/s at concurrency %d", rate[name], cf, c.o.concurrency)
			if e := cpu[name]; e > 0 && cpu["centrifuge"] > 0 {
				note += fmt.Sprintf("; server CPU %.1f vs %.1f µs/beat (%.2f× by CPU)", e, cpu["centrifuge"], cpu["centrifuge"]/e)
			}
			switch a {
			case benchkit.AdapterRueidis:
				note += "; same driver as Centrifuge"
			case benchkit.AdapterRueidisFlush:
				note += "; same driver and client settings as Centrifuge"
			}
			switch via {
			case " solo":
				note += "; without group commit (GroupCommit -1): one call a beat, as before it"
			case "+batcher":
				note += "; single beats from the same workers, merged by package batcher"
			}
			out = append(out, benchkit.TargetRow{Name: "heartbeat vs Centrifuge AddPresence, " + a + via,
				Target: fmt.Sprintf("≥ %.1f×", benchkit.TargetVsCentrifuge), Measured: float64(int(r*100+0.5)) / 100, Unit: "×",
				Met: r >= benchkit.TargetVsCentrifuge, Note: note})
		}
	}
	return out
}

func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}
