package cluster

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	goredisadapter "github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// pipeCounter counts the pipelines with EVALSHA calls that each node client
// of a go-redis ClusterClient sends: one per node and round trip.
type pipeCounter struct {
	mu    sync.Mutex
	pipes map[string]int // node address → pipelines
	cmds  int
}

func (p *pipeCounter) take() (map[string]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pipes, cmds := p.pipes, p.cmds
	p.pipes, p.cmds = map[string]int{}, 0
	return pipes, cmds
}

// nodeHook is a go-redis hook on one node client.
type nodeHook struct {
	p    *pipeCounter
	addr string
}

func (h nodeHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h nodeHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (h nodeHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		// Count EVALSHA only: the EVAL that follows a NOSCRIPT (a script's
		// first use on a node) is the core's fallback, not the shape of a
		// read.
		n := 0
		for _, c := range cmds {
			if c.Name() == "evalsha" {
				n++
			}
		}
		if n > 0 {
			h.p.mu.Lock()
			h.p.pipes[h.addr]++
			h.p.cmds += n
			h.p.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// goredisRounds checks that a spread count reads its shards in one
// pipeline per master: the count key peek is one pipeline, the shard reads
// one per node, and nothing is written (reads never write).
func goredisRounds(t testing.TB, c *redistest.ClusterInstance) {
	ctx := context.Background()
	counter := &pipeCounter{pipes: map[string]int{}}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cc.Close() })
	cc.OnNewNode(func(rdb *goredis.Client) {
		rdb.AddHook(nodeHook{p: counter, addr: rdb.Options().Addr})
	})
	eng, err := core.New(goredisadapter.New(cc), spreadConfig("rounds", true, newVClock().Now))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"first", "second"} {
		sc := core.Scope{Class: "video", ID: id}
		ts := make([]core.ScopeTouch, 300)
		for j := range ts {
			ts[j] = core.ScopeTouch{Scope: sc, Member: "m" + strconv.Itoa(j)}
		}
		if err := eng.TouchBatch(ctx, ts); err != nil {
			t.Fatal(err)
		}
		counter.take()
		if n, err := eng.Count(ctx, sc); err != nil || n.N != 300 {
			t.Fatalf("count %v %v", n, err)
		}
		pipes, cmds := counter.take()
		total := 0
		for _, n := range pipes {
			total += n
		}
		masters := c.Masters()
		for _, m := range masters {
			if pipes[m.Addr] == 0 {
				t.Errorf("master %s received no pipeline; pipelines per node %v", m.Addr, pipes)
			}
		}
		if want := len(masters) + 1; total != want || cmds != spreadShards+1 {
			t.Errorf("a spread count sent %d pipelines with %d commands (%v), want %d with %d: peek, one per master",
				total, cmds, pipes, want, spreadShards+1)
		}
		for addr := range pipes {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				t.Errorf("node address %q: %v", addr, err)
			}
		}
	}
}
