package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
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
		if !c.needAdapter(a) {
			continue
		}
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

// wanted reports whether --designs asks for design name.
func (c *comparison) wanted(name string) bool { return c.o.designs == nil || c.o.designs[name] }

// needAdapter reports whether any wanted design, or the memory rows (which
// go through go-redis), use adapter a.
func (c *comparison) needAdapter(a string) bool {
	if a == benchkit.AdapterGoRedis && c.o.only[groupMemory] {
		return true
	}
	e := "engine/" + a
	return c.wanted(e) || c.wanted(e+" solo") || c.wanted(e+"+batcher")
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
		if !c.needAdapter(a) {
			continue
		}
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
		if c.wanted(d.name) {
			designs = append(designs, d)
		}
		if c.wanted(d.name + " solo") {
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
		}
		if c.wanted(d.name + "+batcher") {
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
	}
	for _, d := range []design{c.centrifugeDesign(c.cpm), c.plainSetDesign(c.prefix("plain-set")), c.plainHashDesign(c.prefix("plain-hash"))} {
		if !c.wanted(d.name) {
			continue
		}
		// every user's keys exist before the run, as the engine's do
		if err := c.warm(ctx, d, n); err != nil {
			return err
		}
		designs = append(designs, d)
	}
	single := benchkit.Load{Concurrency: c.o.concurrency, Duration: c.o.duration}
	batched := benchkit.Load{Concurrency: c.o.batchConc, Duration: c.o.duration}
	var jobs []job
	if c.o.only[groupBeat] {
		for _, d := range designs {
			jobs = append(jobs, job{workload: "beat", design: d.name, batch: 1, load: single, op: func(ctx context.Context, _, seq int) (int, error) {
				return 1, d.beat(ctx, pick(seq, n))
			}})
		}
	}
	if c.o.only[groupBatch] {
		for _, d := range designs {
			if d.batch == nil {
				continue
			}
			idx := make([][]int, batched.Concurrency)
			for w := range idx {
				idx[w] = make([]int, c.o.batch)
			}
			jobs = append(jobs, job{workload: "beat batch", design: d.name, batch: c.o.batch, load: batched, op: func(ctx context.Context, w, seq int) (int, error) {
				us := idx[w]
				for j := range us {
					us[j] = (seq*len(us) + j) % n
				}
				return len(us), d.batch(ctx, us)
			}})
		}
	}
	if c.o.only[groupReads] {
		readers, err := c.reads(ctx, single)
		if err != nil {
			return err
		}
		jobs = append(jobs, readers...)
	}
	return c.measureRounds(ctx, jobs)
}

// reads returns the jobs that compare counting a room of c.o.room members.
func (c *comparison) reads(ctx context.Context, load benchkit.Load) ([]job, error) {
	m := c.o.room
	workload := func(w string) string { return w + " of " + strconv.Itoa(m) }
	var jobs []job
	for _, a := range c.o.adapters {
		if !c.wanted("engine/" + a) {
			continue
		}
		// LastGoodCounts -1: a count the engine remembers and serves when
		// Redis fails (Count.Stale) is no read of Redis; it must fail the
		// row, not swell it.
		e, err := benchkit.NewEngine(ctx, c.conns[a].Store, core.Config{Prefix: c.prefix("room-" + a), Classes: benchkit.BenchClasses(0, 0), LastGoodCounts: -1}, c.o.clock)
		if err != nil {
			return nil, err
		}
		for _, lc := range [][2]string{{"exact", benchkit.ClassExact}, {"compact", benchkit.ClassCompact}} {
			sc := core.Scope{Class: lc[1], ID: "888"}
			if err := benchkit.Fill(ctx, e, sc, m, func(i int) string { return c.users[i] }); err != nil {
				return nil, err
			}
			if _, err := e.Count(ctx, sc); err != nil {
				return nil, err
			}
			jobs = append(jobs, job{workload: workload("count " + lc[0]), design: "engine/" + a, batch: 1, load: load, op: func(ctx context.Context, _, _ int) (int, error) {
				_, err := e.Count(ctx, sc)
				return 1, err
			}})
		}
	}
	if c.wanted("centrifuge") {
		ch := "room:888"
		for i := 0; i < m; i++ {
			if err := c.cpm.AddPresence(ch, c.clients[i], &centrifuge.ClientInfo{ClientID: c.clients[i], UserID: c.users[i]}); err != nil {
				return nil, err
			}
		}
		jobs = append(jobs, job{workload: workload("PresenceStats"), design: "centrifuge", batch: 1, load: load, op: func(context.Context, int, int) (int, error) {
			_, err := c.cpm.PresenceStats(ch)
			return 1, err
		}})
	}
	if c.wanted("plain zadd+setex+hset") {
		zkey := c.prefix("plain-room") + ":online"
		p := c.plain.Pipeline()
		now := float64(time.Now().UnixMilli())
		for i := 0; i < m; i++ {
			p.ZAdd(ctx, zkey, redis.Z{Score: now, Member: c.users[i]})
		}
		if _, err := p.Exec(ctx); err != nil {
			return nil, err
		}
		jobs = append(jobs, job{workload: workload("count (ZCOUNT)"), design: "plain zadd+setex+hset", batch: 1, load: load, op: func(ctx context.Context, _, _ int) (int, error) {
			since := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
			return 1, c.plain.ZCount(ctx, zkey, since, "+inf").Err()
		}})
	}
	return jobs, nil
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
	warm, err := core.New(c.conns[benchkit.AdapterGoRedis].Store, core.Config{Prefix: c.prefix("warm"), Clock: clk.Now})
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
	e, err := core.New(benchkit.Quiet(c.conns[benchkit.AdapterGoRedis].Store), core.Config{Prefix: ep, Clock: clk.Now, UserBuckets: c.o.userBuckets})
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

// targets checks issue 32's goals for each engine design against
// Centrifuge's single beats: each figure is the median of the rounds'
// ratios, with their range in the note.
func (c *comparison) targets() []benchkit.TargetRow {
	med := map[string]benchkit.ThroughputRow{}
	for _, t := range c.rep.Throughput {
		if t.Workload == "beat" {
			med[t.Adapter] = t
		}
	}
	cf := med["centrifuge"]
	var out []benchkit.TargetRow
	for _, r := range c.rep.Ratios {
		e := med[r.Design]
		via := strings.TrimPrefix(r.Design, "engine/")
		note := fmt.Sprintf("%.0f vs %.0f beats/s at %d workers", e.ItemsPerSec, cf.ItemsPerSec, c.o.concurrency)
		if c.o.runs > 1 {
			note += fmt.Sprintf(", medians of %d rounds; ratios by round %s", c.o.runs, spreadString(r.Rate))
		}
		switch {
		case strings.HasPrefix(via, benchkit.AdapterRueidisFlush):
			note += "; same driver and client settings as Centrifuge"
		case strings.HasPrefix(via, benchkit.AdapterRueidis):
			note += "; same driver as Centrifuge"
		}
		switch {
		case strings.HasSuffix(via, " solo"):
			note += "; without group commit (GroupCommit -1): one call a beat, as before it"
		case strings.HasSuffix(via, "+batcher"):
			note += "; single beats from the same workers, merged by package batcher"
		}
		out = append(out, benchkit.TargetRow{Name: "heartbeat vs Centrifuge AddPresence, " + via,
			Target: fmt.Sprintf("≥ %.1f×", benchkit.TargetVsCentrifuge), Measured: r.Rate[0], Unit: "×",
			Met: r.Rate[0] >= benchkit.TargetVsCentrifuge, Note: note})
		for _, k := range []struct {
			what     string
			s        [3]float64
			e, other float64
		}{{"server", r.ServerCPU, e.ServerCPUus, cf.ServerCPUus}, {"client", r.ClientCPU, e.ClientCPUus, cf.ClientCPUus}} {
			if k.s[0] == 0 {
				continue
			}
			note := fmt.Sprintf("%.2f vs %.2f µs/beat at %d workers", k.e, k.other, c.o.concurrency)
			if c.o.runs > 1 {
				note += fmt.Sprintf(", medians of %d rounds; ratios by round %s", c.o.runs, spreadString(k.s))
			}
			out = append(out, benchkit.TargetRow{Name: k.what + " CPU per beat vs Centrifuge's, " + via,
				Target: fmt.Sprintf("≤ %.1f×", TargetCPUVsCentrifuge), Measured: k.s[0], Unit: "×",
				Met: k.s[0] <= TargetCPUVsCentrifuge, Note: note})
		}
	}
	return out
}

// TargetCPUVsCentrifuge is issue 23's and 32's goal for the server's and
// the client's CPU per steady beat, as a share of Centrifuge's.
const TargetCPUVsCentrifuge = 0.8

func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}
