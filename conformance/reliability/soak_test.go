package reliability_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/sweeper"
	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/testtier"
)

var soakFlag = flag.Duration("soak", 0, "how long the soak runs on each adapter (default 10s, or $PRESENCE_SOAK)")

// soakDuration is -soak, else $PRESENCE_SOAK, else 10 s.
func soakDuration(tb testing.TB) time.Duration {
	if *soakFlag > 0 {
		return *soakFlag
	}
	if v := os.Getenv("PRESENCE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			tb.Fatalf("PRESENCE_SOAK=%q: want a positive duration such as 2m", v)
		}
		return d
	}
	return 10 * time.Second
}

// Shape of the soak: a fixed population, so that memory must level off.
const (
	soakUsers    = 2000
	soakWorkers  = 32
	soakRooms    = 20
	soakVideos   = 5
	soakChurners = 8 // users per worker that log in and out
)

// soakStats is what the workers count.
type soakStats struct {
	ops, beats atomic.Int64
	all        *rig.Histogram
	byOp       map[string]*rig.Histogram
	mu         sync.Mutex
	errs       []error
}

func (s *soakStats) fail(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 20 {
		s.errs = append(s.errs, fmt.Errorf("%s: %w", op, err))
	}
}

// memory is one sample of the process's live heap (after a GC) and of the
// server's used memory.
type memory struct {
	heap, redis, dataset uint64
	goroutines, clients  int
	keys                 int64
}

func sample(tb testing.TB, srv *redistest.Instance) memory {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memory{heap: ms.HeapAlloc, redis: uint64(rig.Info(tb, srv, "memory", "used_memory")),
		dataset: uint64(rig.Info(tb, srv, "memory", "used_memory_dataset")), goroutines: runtime.NumGoroutine(),
		clients: int(rig.Info(tb, srv, "clients", "connected_clients"))}
	m.keys, _ = rig.Do(tb, srv, "DBSIZE").(int64)
	return m
}

// TestSoak runs many goroutines as fast as they go for a fixed time on
// each adapter: batched heartbeats, touches, status and count reads,
// member pages, logins and logouts, with a sweeper running. No call may
// fail, no goroutine may outlive the run (goleak), and once warm the
// process's live heap and the server's memory must level off. It reports
// the rate, the latency quantiles and the memory drift.
func TestSoak(t *testing.T) {
	if *soakFlag == 0 && os.Getenv("PRESENCE_SOAK") == "" {
		testtier.SkipUnlessDeep(t, "a soak runs for its full duration on each adapter (or set -soak or PRESENCE_SOAK)")
	}
	d := soakDuration(t)
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) { soak(t, a, d) })
	}
}

func soak(t *testing.T, a rig.Adapter, d time.Duration) {
	rig.CheckLeaks(t)
	srv := redistest.Server(t)
	classes := core.DefaultClasses()
	classes["uv"] = core.ScopeClass{Layout: core.LayoutApprox, Window: 10 * time.Minute}
	eng := rig.Engine(t, a.Open(t, srv.Addr), core.Config{Classes: classes})
	users := make([]string, soakUsers)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
	}
	st := &soakStats{all: rig.NewHistogram(), byOp: map[string]*rig.Histogram{}}
	for _, op := range []string{"heartbeat", "touch", "statuses", "count", "members", "login", "logout"} {
		st.byOp[op] = rig.NewHistogram()
	}
	// Warm-up: every user present and in its room, video and site scopes
	// once, so that the timed run works on a full population.
	wctx := bounded(t, settle)
	for i := 0; i < len(users); i += 100 {
		var beats []core.Heartbeat
		var touches []core.ScopeTouch
		for j, u := range users[i : i+100] {
			beats = append(beats, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb})
			touches = append(touches, soakTouches(i+j, u)...)
		}
		if _, err := eng.HeartbeatBatch(wctx, beats); err != nil {
			t.Fatal(err)
		}
		if err := eng.TouchBatch(wctx, touches); err != nil {
			t.Fatal(err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		sweeper.Run(ctx, eng, sweeper.Options{UserInterval: 500 * time.Millisecond, ScopeInterval: time.Second,
			OnReport: func(kind string, _ core.SweepReport, err error) {
				if err != nil && ctx.Err() == nil {
					st.fail("sweep "+kind, err)
				}
			}})
	}()
	for w := range soakWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			soakWorker(ctx, eng, users, w, st)
		}()
	}

	start := time.Now()
	warmAt := start.Add(d * 3 / 10)
	time.Sleep(time.Until(warmAt))
	opsWarm := st.ops.Load()
	warm := sample(t, srv)
	peak := warm
	for time.Now().Before(start.Add(d)) {
		time.Sleep(min(time.Second, time.Until(start.Add(d))))
		m := sample(t, srv)
		peak.heap, peak.redis, peak.dataset = max(peak.heap, m.heap), max(peak.redis, m.redis), max(peak.dataset, m.dataset)
	}
	end := sample(t, srv)
	opsEnd := st.ops.Load()
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	<-sweepDone

	for _, err := range st.errs {
		t.Errorf("soak: %v", err)
	}
	// Memory: generous bounds, so that only growth without limit fails.
	if end.heap > 2*warm.heap+16<<20 {
		t.Errorf("live heap grew from %d to %d bytes once warm", warm.heap, end.heap)
	}
	if end.redis > warm.redis*3/2+2<<20 {
		t.Errorf("redis used_memory grew from %d to %d bytes once warm", warm.redis, end.redis)
	}
	total := st.ops.Load()
	rate := float64(total) / elapsed.Seconds()
	warmRate := float64(opsEnd-opsWarm) / time.Since(warmAt).Seconds()
	t.Logf("FIGURE soak adapter=%s duration=%v workers=%d ops=%d rate=%.0f/s (warm %.0f/s) beats=%.0f/s p50=%v p99=%v p999=%v max=%v",
		a.Name, elapsed.Round(time.Millisecond), soakWorkers, total, rate, warmRate, float64(st.beats.Load())/elapsed.Seconds(),
		st.all.Quantile(0.5), st.all.Quantile(0.99), st.all.Quantile(0.999), st.all.Max())
	for _, op := range []string{"heartbeat", "touch", "statuses", "count", "members", "login", "logout"} {
		h := st.byOp[op]
		t.Logf("FIGURE soak adapter=%s op=%s n=%d p50=%v p99=%v max=%v", a.Name, op, h.Count(), h.Quantile(0.5), h.Quantile(0.99), h.Max())
	}
	t.Logf("FIGURE soak-memory adapter=%s heap warm=%s end=%s peak=%s drift=%+.1f%% redis warm=%s end=%s peak=%s drift=%+.1f%% dataset warm=%s end=%s drift=%+.1f%% keys warm=%d end=%d clients warm=%d end=%d goroutines warm=%d end=%d",
		a.Name, mib(warm.heap), mib(end.heap), mib(peak.heap), drift(warm.heap, end.heap),
		mib(warm.redis), mib(end.redis), mib(peak.redis), drift(warm.redis, end.redis),
		mib(warm.dataset), mib(end.dataset), drift(warm.dataset, end.dataset), warm.keys, end.keys, warm.clients, end.clients, warm.goroutines, end.goroutines)
}

func mib(b uint64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

func drift(from, to uint64) float64 { return 100 * (float64(to) - float64(from)) / float64(from) }

// soakTouches are user i's touches: a user is in one room, watches one
// video, and visits the site, so that scope membership is bounded.
func soakTouches(i int, user string) []core.ScopeTouch {
	return []core.ScopeTouch{
		{Scope: core.Scope{Class: "room", ID: "r" + strconv.Itoa(i%soakRooms)}, Member: user},
		{Scope: core.Scope{Class: "video", ID: "v" + strconv.Itoa(i%soakVideos)}, Member: user},
		{Scope: core.Scope{Class: "uv", ID: "site"}, Member: user},
	}
}

// soakWorker calls the engine in a loop until ctx ends: a weighted mix of
// the calls a presence service makes.
func soakWorker(ctx context.Context, eng *core.Engine, users []string, w int, st *soakStats) {
	rng := rand.New(rand.NewPCG(uint64(w), 99))
	pickN := func() int { return rng.IntN(len(users)) }
	pick := func() string { return users[pickN()] }
	room := func() core.Scope { return core.Scope{Class: "room", ID: "r" + strconv.Itoa(rng.IntN(soakRooms))} }
	video := func() core.Scope { return core.Scope{Class: "video", ID: "v" + strconv.Itoa(rng.IntN(soakVideos))} }
	tokens := map[string]string{}
	timed := func(op string, f func(ctx context.Context) error) {
		// Bounded, with room for a starved machine: CI runs beside others.
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		start := time.Now()
		err := f(cctx)
		d := time.Since(start)
		st.all.Record(d)
		st.byOp[op].Record(d)
		st.ops.Add(1)
		if err != nil {
			st.fail(op, err)
		}
	}
	for ctx.Err() == nil {
		switch n := rng.IntN(100); {
		case n < 45:
			beats := make([]core.Heartbeat, 8)
			for i := range beats {
				beats[i] = core.Heartbeat{User: pick(), Device: "web", Kind: core.KindWeb, Active: rng.IntN(4) == 0}
			}
			timed("heartbeat", func(ctx context.Context) error {
				acks, err := eng.HeartbeatBatch(ctx, beats)
				for _, a := range acks {
					if a.Err != nil && err == nil {
						err = a.Err
					}
				}
				st.beats.Add(int64(len(beats)))
				return err
			})
		case n < 65:
			var touches []core.ScopeTouch
			for range 3 {
				i := pickN()
				touches = append(touches, soakTouches(i, users[i])...)
			}
			timed("touch", func(ctx context.Context) error { return eng.TouchBatch(ctx, touches) })
		case n < 75:
			batch := make([]string, 50)
			for i := range batch {
				batch[i] = pick()
			}
			timed("statuses", func(ctx context.Context) error { _, err := eng.Statuses(ctx, batch); return err })
		case n < 87:
			sc := room()
			if n%2 == 0 {
				sc = video()
			}
			timed("count", func(ctx context.Context) error { _, err := eng.Count(ctx, sc); return err })
		case n < 92:
			timed("members", func(ctx context.Context) error { _, err := eng.Members(ctx, room(), "", 50); return err })
		default:
			u := "churn-" + strconv.Itoa(w) + "-" + strconv.Itoa(rng.IntN(soakChurners))
			if tok, ok := tokens[u]; ok {
				delete(tokens, u)
				timed("logout", func(ctx context.Context) error { _, err := eng.Logout(ctx, u, "phone", tok); return err })
				continue
			}
			timed("login", func(ctx context.Context) error {
				r, err := eng.Login(ctx, core.Login{User: u, Device: "phone", Kind: core.KindAndroid, Gateway: "gw-" + strconv.Itoa(w)})
				if err == nil {
					tokens[u] = r.Token
				}
				return err
			})
		}
	}
}
