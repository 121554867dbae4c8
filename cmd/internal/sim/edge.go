package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/host"
)

// The simulated engines' settings beyond the defaults: one user bucket
// and one scope bucket, so that an edge's beats of one tick make one
// script call; video scopes in the compact layout with few shards.
const (
	videoClass  = "video"
	videoWindow = 10 * time.Minute
	videoSweep  = time.Minute
	videoShards = 8
)

type opKind uint8

const (
	opBeat opKind = iota
	opLogin
	opLogout
	opDisconnect
	opManual
	opTouch
	opLeave
)

// op is an operation an edge sends at the end of the tick.
type op struct {
	kind      opKind
	device    int32
	user      int32
	video     int32
	heartbeat core.Heartbeat
	policy    *core.Policy
	manual    core.Manual
	stale     bool
}

// edge is one edge node.
type edge struct {
	index  int
	name   string
	up     bool
	engine core.Presence // core.Engine or host.Engine
	store  *edgeStore
	close  func()
	queue  []op
	lives  int
}

// config is the engine configuration of every edge.
func (w *world) config() core.Config {
	return core.Config{Prefix: w.cfg.Prefix, Clock: w.clock.Now, UserBuckets: 1, ScopeBuckets: 1,
		Classes: map[string]core.ScopeClass{videoClass: {Layout: core.LayoutCompact, Window: videoWindow,
			Shards: videoShards, SweepInterval: videoSweep}}}
}

// boot starts (or restarts) an edge.
func (w *world) boot(e *edge) error {
	e.lives++
	e.store = &edgeStore{inner: w.store, sequencer: w.sequencer, ticket: -1}
	seed := fmt.Sprintf("sim-%d-%s-%d", w.cfg.Seed, e.name, e.lives)
	cfg := w.config()
	switch w.cfg.Engine {
	case EngineWASM:
		instance, err := w.runtime.NewInstance(w.ctx, e.store)
		if err != nil {
			return err
		}
		eng, err := instance.Configure(w.ctx, cfg, host.EngineOptions{Seed: seed})
		if err != nil {
			instance.Close(w.ctx)
			return err
		}
		e.engine, e.close = eng, func() { instance.Close(context.WithoutCancel(w.ctx)) }
	default:
		cfg.Rand = abi.SeededRand(seed)
		eng, err := core.New(e.store, cfg)
		if err != nil {
			return err
		}
		e.engine, e.close = eng, func() {}
	}
	e.up = true
	return nil
}

// crash takes an edge down: its instance is gone, and its connected
// devices reconnect to the others.
func (w *world) crash() {
	if len(w.edges) < 2 {
		return // nowhere to move to
	}
	e := w.edges[w.rng.IntN(len(w.edges))]
	w.crashedEdge = e.index
	e.up = false
	e.close()
	e.queue = nil
	w.stats.Crashes++
	for i := range w.devices {
		d := &w.devices[i]
		if d.edge != e.index {
			continue
		}
		d.edge = -1
		if d.online && !d.background && !d.paused {
			d.paused = true
			d.sessionGeneration++
			d.beatGeneration++
			w.stats.Moved++
			w.at(w.now+1000+w.rng.Int64N(max(1, w.mix.CrashReconnect.Milliseconds()-1000)), event{kind: evReconnect, generation: d.sessionGeneration, index: d.index})
		}
	}
}

// liveEdge picks an edge that is up.
func (w *world) liveEdge() int {
	for {
		if e := w.edges[w.rng.IntN(len(w.edges))]; e.up {
			return e.index
		}
	}
}

func (w *world) send(edgeIdx int, o op) {
	e := w.edges[edgeIdx]
	e.queue = append(e.queue, o)
}
