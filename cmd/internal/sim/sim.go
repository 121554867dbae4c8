package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/host"
)

// world is one run.
type world struct {
	ctx   context.Context
	cfg   Config
	mix   Mix
	rng   *rand.Rand
	ru    rules
	clock *clock
	start int64
	now   int64
	tick  int64 // ms
	ticks int
	k     int // current tick

	users   []user
	devs    []device
	byID    map[string]int32
	videos  []video
	vweight []float64
	wheel   [][]event

	edges   []*edge
	rt      *host.Runtime
	store   *countingStore
	seq     *sequencer
	settleS int64 // how long after a change its publication may lag

	stats Stats
	rows  []Row

	// the last check of the video counts
	lastCounts int64
	viewers    [2]int64 // truth, engine
	countBad   int
	countAge   time.Duration

	viol   []string
	wall0  time.Time
	crashK int
	backK  int
	down   int
}

// clock is the virtual clock every engine reads.
type clock struct{ ms atomic.Int64 }

// Now returns the virtual instant.
func (c *clock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Run runs a simulation. The error is for a run that could not be carried
// out (a Redis failure, an invalid configuration); disagreements between
// the engine and the truth are in the result (Result.Err).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &world{ctx: ctx, cfg: cfg, mix: cfg.Mix, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		clock: &clock{}, tick: cfg.Tick.Milliseconds(), wall0: time.Now()}
	w.ru = rules{idle: (5 * time.Minute).Milliseconds(), push: (10 * time.Minute).Milliseconds(),
		leave: (15 * time.Second).Milliseconds(), coalesce: time.Second.Milliseconds(), fence: time.Hour.Milliseconds()}
	w.settleS = w.ru.leave + w.ru.coalesce + 2*cfg.SweepEvery.Milliseconds() + w.tick
	w.start = cfg.Start.UnixMilli()
	w.now = w.start
	w.clock.ms.Store(w.start)
	w.ticks = int(cfg.Duration.Milliseconds() / w.tick)
	w.wheel = make([][]event, w.ticks+1)

	store, mini := cfg.Store, cfg.Mini
	if store == nil {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, fmt.Errorf("sim: starting miniredis: %w", err)
		}
		defer mr.Close()
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		store, mini = goredis.New(c), mr
	}
	if mini != nil {
		mini.SetTime(cfg.Start)
		mini.ClockTTL(true)
	}
	w.store = &countingStore{inner: store}
	w.seq = newSequencer()
	if cfg.Engine == EngineWASM {
		if w.rt = cfg.Runtime; w.rt == nil {
			if w.rt, err = host.NewRuntime(ctx, cfg.Module, host.Options{}); err != nil {
				return nil, err
			}
			defer w.rt.Close(context.WithoutCancel(ctx))
		}
	}
	w.populate()
	for i := range w.edges {
		if err := w.boot(w.edges[i]); err != nil {
			return nil, err
		}
	}
	if w.mix.Crash > 0 {
		w.crashK = int(float64(w.ticks) * w.mix.Crash)
		w.backK = w.crashK + int(w.mix.CrashDown.Milliseconds()/w.tick)
	}
	sweepK := int(cfg.SweepEvery.Milliseconds() / w.tick)
	censusK := int(cfg.CensusEvery.Milliseconds() / w.tick)
	progressK := int(time.Minute.Milliseconds() / w.tick)
	for w.k = 1; w.k <= w.ticks; w.k++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w.now = w.start + int64(w.k)*w.tick
		w.clock.ms.Store(w.now)
		if mini != nil {
			mini.SetTime(time.UnixMilli(w.now))
		}
		if w.crashK > 0 && w.k == w.crashK {
			w.crash()
		}
		if w.crashK > 0 && w.k == w.backK && !w.edges[w.down].up {
			if err := w.boot(w.edges[w.down]); err != nil {
				return nil, err
			}
		}
		w.startWatching()
		for _, ev := range w.wheel[w.k] {
			w.handle(ev)
		}
		w.wheel[w.k] = nil
		if err := w.flush(); err != nil {
			return nil, err
		}
		if w.k%sweepK == 0 {
			if err := w.sweep(censusK > 0 && w.k%censusK == 0); err != nil {
				return nil, err
			}
		}
		if cfg.Progress != nil && w.k%progressK == 0 {
			r := w.rows[len(w.rows)-1]
			fmt.Fprintf(cfg.Progress, "  t=%-6s wall=%5.1fs online=%d/%d viewers=%d/%d events=%d redis=%d\n",
				time.Duration(int64(w.k)*w.tick)*time.Millisecond, time.Since(w.wall0).Seconds(),
				r.Engine[core.StatusOnline], r.Truth[core.StatusOnline], r.ViewersEngine, r.ViewersTruth,
				w.stats.Events, w.store.calls.Load())
		}
	}
	return w.result(), nil
}
