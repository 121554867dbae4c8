package benchkit_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
	"github.com/presencekit/presence/internal/slot"
)

// replay answers each call with the reply a real server gave the last call
// of the same script, so that benchmarks measure the core alone while the
// replies stay whatever shape the scripts return today.
type replay struct {
	mu      sync.Mutex
	live    core.Store // nil once frozen
	replies map[replyKey][]core.Result
	cache   map[string]core.Value
}

// replyKey finds a recorded reply: the first call's script and the number
// of calls.
type replyKey struct {
	sha string
	n   int
}

func (r *replay) Eval(ctx context.Context, calls []core.Call) []core.Result {
	if r.live != nil {
		res := r.live.Eval(ctx, calls)
		r.mu.Lock()
		if len(calls) > 0 && res[0].Err == nil {
			sha := calls[0].SHA
			if sha == "" { // the EVAL that followed a NOSCRIPT
				sum := sha1.Sum([]byte(calls[0].Source))
				sha = hex.EncodeToString(sum[:])
			}
			r.replies[replyKey{sha, len(calls)}] = res
		}
		r.mu.Unlock()
		return res
	}
	if len(calls) == 0 {
		return nil
	}
	return r.replies[replyKey{calls[0].SHA, len(calls)}]
}

// CachedGet serves the hot count key, as the rueidis adapter does on a hit.
func (r *replay) CachedGet(_ context.Context, key string) (core.Value, error) {
	if v, ok := r.cache[key]; ok {
		return v, nil
	}
	return core.Value{}, nil
}

// FenceCache has nothing to wait for: the replay's cache never lags.
func (r *replay) FenceCache(context.Context, []string) error { return nil }

// recorded returns an engine whose store replays replies recorded on
// miniredis for the operations that prime runs.
func recorded(tb testing.TB, cfg core.Config, prime func(e *core.Engine) error) (*core.Engine, *replay) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	tb.Cleanup(func() { c.Close() })
	r := &replay{live: goredis.New(c), replies: map[replyKey][]core.Result{}, cache: map[string]core.Value{}}
	e, err := core.New(r, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := prime(e); err != nil {
		tb.Fatal(err)
	}
	r.live = nil
	return e, r
}

// steadyConfig publishes changes at once, so that the second beat of a
// prime is already steady (lua/heartbeat_steady.lua): nothing is pending.
var steadyConfig = core.Config{CoalesceWindow: -1}

// BenchmarkHeartbeat measures the core's work for one accepted steady
// heartbeat with a token through the exported API: checks, arguments, the
// call and decoding a real reply.
func BenchmarkHeartbeat(b *testing.B) {
	var tok string
	e, _ := recorded(b, steadyConfig, func(e *core.Engine) error {
		ack, err := e.Heartbeat(context.Background(), core.Heartbeat{User: "user-1234", Device: "d0", Kind: core.KindWeb})
		tok = ack.Token
		if err == nil {
			_, err = e.Heartbeat(context.Background(), core.Heartbeat{User: "user-1234", Device: "d0", Kind: core.KindWeb, Token: tok, Active: true})
		}
		return err
	})
	ctx := context.Background()
	hb := core.Heartbeat{User: "user-1234", Device: "d0", Kind: core.KindWeb, Token: tok, Active: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Heartbeat(ctx, hb); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHeartbeatAllocs holds the core to issue 8's bound: at most 2
// allocations per single steady heartbeat, the common one (reply decoding
// included). A beat that changes something takes a second script call.
func TestHeartbeatAllocs(t *testing.T) {
	var tok string
	e, _ := recorded(t, steadyConfig, func(e *core.Engine) error {
		ack, err := e.Heartbeat(context.Background(), core.Heartbeat{User: "user-1234", Device: "d0", Kind: core.KindWeb})
		tok = ack.Token
		if err == nil {
			_, err = e.Heartbeat(context.Background(), core.Heartbeat{User: "user-1234", Device: "d0", Kind: core.KindWeb, Token: tok, Active: true})
		}
		return err
	})
	ctx := context.Background()
	hb := core.Heartbeat{User: "user-1234", Device: "d0", Kind: core.KindWeb, Token: tok, Active: true}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := e.Heartbeat(ctx, hb); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("a heartbeat allocates %.1f times, want at most 2", allocs)
	}
}

// BenchmarkStatus measures one status read: the call and decoding the
// device records into states by the rules.
func BenchmarkStatus(b *testing.B) {
	e, _ := recorded(b, core.Config{}, func(e *core.Engine) error {
		ctx := context.Background()
		for _, d := range []string{"phone", "laptop"} {
			if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "user-1234", Device: d, Kind: core.KindIOS, Active: true}); err != nil {
				return err
			}
		}
		_, err := e.Status(ctx, "user-1234")
		return err
	})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Status(ctx, "user-1234"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTouchBatch measures key building and arguments of 100 touches
// of one compact scope (shard hash included), per touch.
func BenchmarkTouchBatch(b *testing.B) {
	touches := make([]core.ScopeTouch, 100)
	for i := range touches {
		touches[i] = core.ScopeTouch{Scope: core.Scope{Class: "video", ID: "10086"}, Member: benchkit.MemberID(i)}
	}
	e, _ := recorded(b, core.Config{}, func(e *core.Engine) error { return e.TouchBatch(context.Background(), touches) })
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.TouchBatch(ctx, touches); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(touches)), "ns/touch")
}

// BenchmarkCountCached measures a hot compact count served by a
// CachedReader: what the engine adds to the rueidis cache hit.
func BenchmarkCountCached(b *testing.B) {
	sc := core.Scope{Class: "video", ID: "10086"}
	e, r := recorded(b, core.Config{Prefix: "p"}, func(e *core.Engine) error { return nil })
	key := keyspace.New("p", 0, 0).Count(sc.Class, sc.ID)
	r.cache[key] = core.Value{Kind: core.ValueString, Str: "12345:1700000000000"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, err := e.Count(ctx, sc)
		if err != nil || c.N != 12345 {
			b.Fatal(c, err)
		}
	}
}

// BenchmarkSlot measures the cluster slot of a typical key.
func BenchmarkSlot(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		slot.Of("presence:{u12}:d:user-1234")
	}
}

// BenchmarkHistRecord measures the runner's per-operation bookkeeping.
func BenchmarkHistRecord(b *testing.B) {
	var h benchkit.Hist
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(1000 + 37*time.Duration(i%1000))
	}
}
