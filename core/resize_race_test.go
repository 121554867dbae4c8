package core_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// TestCompactResizeUnderConcurrency touches 1,000 new members into a
// self-sized compact scope of two members a shard from 8 goroutines while
// another sweeps it in small steps, over 600 members whose window has
// passed: touches split shards while sweeps remove members and merge them.
// Then no touch may be lost and no member counted twice: the count, the
// members listed (each once) and the model's, after the same operations in
// one order, agree; the meta's total is the sum of its shard sizes and of
// the shards' lengths, and each of the scope's shards is in listpack
// encoding.
func TestCompactResizeUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	_, c := realClient(t)
	clk := &manualClock{t: t0}
	cfg := scopeConfigSpread(2, false)
	cfg.SweepBudget, cfg.Clock = 16, clk.Now
	e, err := core.New(goredis.New(c), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mcfg := cfg
	model, err := core.NewModel(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	var old, fresh []core.ScopeTouch
	for i := range 600 {
		old = append(old, core.ScopeTouch{Scope: video, Member: "old" + strconv.Itoa(i)})
	}
	for i := range 1000 {
		fresh = append(fresh, core.ScopeTouch{Scope: video, Member: "new" + strconv.Itoa(i)})
	}
	touchAll(t, e, old)
	touchAll(t, model, old)
	clk.t = clk.t.Add(61 * time.Second) // the old ones are past their window; the clock stays here

	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := g * 125; lo < (g+1)*125; {
				hi := lo + 1 + lo%7
				if end := (g + 1) * 125; hi > end {
					hi = end
				}
				if err := e.TouchBatch(ctx, fresh[lo:hi]); err != nil {
					errs <- err
					return
				}
				lo = hi
			}
		}()
	}
	sweeps := make(chan [2]int, 1)
	go func() {
		var n [2]int // passes, steps
		for {
			select {
			case <-done:
				sweeps <- n
				return
			default:
			}
			r, err := e.SweepScopes(ctx)
			if err != nil {
				errs <- err
			}
			n[0], n[1] = n[0]+1, n[1]+r.Steps
		}
	}()
	wg.Wait()
	close(done)
	n := <-sweeps
	t.Logf("%d sweep passes of %d steps in all during the touches", n[0], n[1])
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	touchAll(t, model, fresh)
	for _, p := range []core.Presence{e, model} {
		if _, err := opdo.Do[core.SweepReport](ctx, p, core.SweepScopes{}); err != nil {
			t.Fatal(err)
		}
	}
	// the scope is due again an interval later: a pass that finds nothing
	// more to remove or merge
	clk.t = clk.t.Add(11 * time.Second)
	for _, p := range []core.Presence{e, model} {
		if _, err := opdo.Do[core.SweepReport](ctx, p, core.SweepScopes{}); err != nil {
			t.Fatal(err)
		}
		if got := countOf(t, p); got != 1000 {
			t.Errorf("%T: count %d, want 1000", p, got)
		}
	}
	got, want := allMembers(t, e), allMembers(t, model)
	if len(got) != 1000 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("members: %d listed, want the model's %d", len(got), len(want))
	}

	meta := core.Keys(e).CompactMeta(video.Class, video.ID)
	m, err := c.HGetAll(ctx, meta).Result()
	if err != nil {
		t.Fatal(err)
	}
	level, _ := strconv.Atoi(m["L"])
	split, _ := strconv.Atoi(m["s"])
	shards := 1<<level + split
	var recorded, stored int64
	for n := range shards {
		key := core.Keys(e).Shard(video.Class, video.ID, n)
		size, _ := strconv.ParseInt(m[strconv.Itoa(n)], 10, 64)
		recorded += size
		l, err := c.HLen(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		stored += l
		if l > 0 {
			if enc, _ := c.ObjectEncoding(ctx, key).Result(); enc != "listpack" {
				t.Errorf("shard %d: %d members, encoding %s", n, l, enc)
			}
		}
	}
	if m["t"] != "1000" || recorded != 1000 || stored != 1000 {
		t.Errorf("meta t %s, recorded sizes %d, shard lengths %d over %d shards; want 1000 each", m["t"], recorded, stored, shards)
	}
	// at most ShardSize members a shard on average, at least a quarter
	if shards < 1000/2 || shards > 4*1000/2 {
		t.Errorf("%d shards for 1,000 members of 2 a shard", shards)
	}
}
