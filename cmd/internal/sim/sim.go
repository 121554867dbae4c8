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
	ctx         context.Context
	cfg         Config
	mix         Mix
	rng         *rand.Rand
	rules       rules
	clock       *clock
	start       int64
	now         int64
	tickMS      int64 // the virtual time step, in ms
	tickCount   int
	currentTick int // the tick being run, from 1 to tickCount

	users        []user
	devices      []device
	userByID     map[string]int32
	videos       []video
	videoWeights []float64
	wheel        [][]event // the events scheduled for each tick

	edges           []*edge
	runtime         *host.Runtime
	store           *countingStore
	sequencer       *sequencer
	maxPublishLagMS int64 // how long after a change its publication may lag

	stats Stats
	rows  []Row

	// the last check of the video counts
	lastCountCheck  int64
	viewers         [2]int64 // truth, engine
	countMismatches int
	maxCountAge     time.Duration

	violations  []string
	wallStart   time.Time
	crashTick   int // the tick at which an edge crashes (0: none)
	restartTick int // the tick at which it boots again
	crashedEdge int // its index
}

// clock is the virtual clock every engine reads.
type clock struct{ unixMS atomic.Int64 }

// Now returns the virtual instant.
func (c *clock) Now() time.Time { return time.UnixMilli(c.unixMS.Load()) }

// Run runs a simulation. The error is for a run that could not be carried
// out (a Redis failure, an invalid configuration); disagreements between
// the engine and the truth are in the result (Result.Err).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &world{ctx: ctx, cfg: cfg, mix: cfg.Mix, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		clock: &clock{}, tickMS: cfg.Tick.Milliseconds(), wallStart: time.Now()}
	w.rules = rules{idleAfter: (5 * time.Minute).Milliseconds(), pushWindow: (10 * time.Minute).Milliseconds(),
		leaveDelay: (15 * time.Second).Milliseconds(), coalesceWindow: time.Second.Milliseconds(), kickFence: time.Hour.Milliseconds()}
	w.maxPublishLagMS = w.rules.leaveDelay + w.rules.coalesceWindow + 2*cfg.SweepEvery.Milliseconds() + w.tickMS
	w.start = cfg.Start.UnixMilli()
	w.now = w.start
	w.clock.unixMS.Store(w.start)
	w.tickCount = int(cfg.Duration.Milliseconds() / w.tickMS)
	w.wheel = make([][]event, w.tickCount+1)

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
	w.sequencer = newSequencer()
	if cfg.Engine == EngineWASM {
		if w.runtime = cfg.Runtime; w.runtime == nil {
			if w.runtime, err = host.NewRuntime(ctx, cfg.Module, host.Options{}); err != nil {
				return nil, err
			}
			defer w.runtime.Close(context.WithoutCancel(ctx))
		}
	}
	w.populate()
	for i := range w.edges {
		if err := w.boot(w.edges[i]); err != nil {
			return nil, err
		}
	}
	if w.mix.Crash > 0 {
		w.crashTick = int(float64(w.tickCount) * w.mix.Crash)
		w.restartTick = w.crashTick + int(w.mix.CrashDown.Milliseconds()/w.tickMS)
	}
	sweepTicks := int(cfg.SweepEvery.Milliseconds() / w.tickMS)
	censusTicks := int(cfg.CensusEvery.Milliseconds() / w.tickMS)
	progressTicks := int(time.Minute.Milliseconds() / w.tickMS)
	for w.currentTick = 1; w.currentTick <= w.tickCount; w.currentTick++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w.now = w.start + int64(w.currentTick)*w.tickMS
		w.clock.unixMS.Store(w.now)
		if mini != nil {
			mini.SetTime(time.UnixMilli(w.now))
		}
		if w.crashTick > 0 && w.currentTick == w.crashTick {
			w.crash()
		}
		if w.crashTick > 0 && w.currentTick == w.restartTick && !w.edges[w.crashedEdge].up {
			if err := w.boot(w.edges[w.crashedEdge]); err != nil {
				return nil, err
			}
		}
		w.startWatching()
		for _, ev := range w.wheel[w.currentTick] {
			w.handle(ev)
		}
		w.wheel[w.currentTick] = nil
		if err := w.flush(); err != nil {
			return nil, err
		}
		if w.currentTick%sweepTicks == 0 {
			if err := w.sweep(censusTicks > 0 && w.currentTick%censusTicks == 0); err != nil {
				return nil, err
			}
		}
		if cfg.Progress != nil && w.currentTick%progressTicks == 0 {
			r := w.rows[len(w.rows)-1]
			fmt.Fprintf(cfg.Progress, "  t=%-6s wall=%5.1fs online engine=%d truth=%d  viewers engine=%d truth=%d  events=%d redis=%d\n",
				time.Duration(int64(w.currentTick)*w.tickMS)*time.Millisecond, time.Since(w.wallStart).Seconds(),
				r.Engine[core.StatusOnline], r.Truth[core.StatusOnline], r.ViewersEngine, r.ViewersTruth,
				w.stats.Events, w.store.calls.Load())
		}
	}
	return w.result(), nil
}
