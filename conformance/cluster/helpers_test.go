package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/slot"
	"github.com/presencekit/presence/internal/testtier"
)

// envScale multiplies the sizes of this package's tests (sequences per
// adapter, race and heartbeat durations): PRESENCE_CLUSTER_SCALE=10.
const envScale = "PRESENCE_CLUSTER_SCALE"

// scale returns the factor of envScale; when unset or invalid, a half at the
// deep tier (PRESENCE_DEEP=1) and a fifth at the everyday tier: sequences on
// a cluster check the slots of every call, while the planted bugs of the
// scripts are caught on a single node (package conformance).
func scale() float64 {
	if s, err := strconv.ParseFloat(os.Getenv(envScale), 64); err == nil && s > 0 {
		return s
	}
	return testtier.Pick(0.2, 0.5)
}

// scaled returns n times the scale, at least 1.
func scaled(n int) int { return max(1, int(float64(n)*scale())) }

// scaledDur returns d times the scale.
func scaledDur(d time.Duration) time.Duration { return time.Duration(float64(d) * scale()) }

// scaledBound returns a wait bound d, longer at a scale above 1 and never
// shorter.
func scaledBound(d time.Duration) time.Duration { return time.Duration(float64(d) * max(1, scale())) }

// slotGuard wraps Stores and records every call that would be a cluster
// error: keys of one call in more than one slot (checked with slot.Check
// before the call goes out), and any reply that says CROSSSLOT, or that a
// script touched a key outside its slot (scripts build some keys from their
// arguments, which only the server can check).
type slotGuard struct {
	mu         sync.Mutex
	calls      int64
	batches    int64
	violations []string
}

// wrap returns s with its traffic recorded by g, with s's capabilities.
func (g *slotGuard) wrap(s core.Store) core.Store {
	return conformance.Intercept(s, conformance.Interceptor{Eval: g.eval})
}

func (g *slotGuard) eval(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result {
	var bad []string
	for _, c := range calls {
		if err := slot.Check(c.Keys); err != nil {
			bad = append(bad, fmt.Sprintf("keys in several slots: %q", c.Keys))
		}
	}
	res := next(ctx, calls)
	for i, r := range res {
		if r.Err != nil && crossSlotError(r.Err) && i < len(calls) {
			bad = append(bad, fmt.Sprintf("%v for keys %q", r.Err, calls[i].Keys))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls += int64(len(calls))
	g.batches++
	g.violations = append(g.violations, bad...)
	return res
}

// crossSlotError reports whether err is the client's or the server's word
// for keys outside one slot.
func crossSlotError(err error) bool {
	if errors.Is(err, core.ErrCrossSlot) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"CROSSSLOT", "non local key", "do not hash to the same slot", "hash to different slots"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// check fails tb if any call broke the slot rule, and returns the number of
// calls seen.
func (g *slotGuard) check(tb testing.TB) int64 {
	tb.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.violations) > 0 {
		n := min(len(g.violations), 10)
		tb.Errorf("%d cluster slot violations, the first %d:\n%s", len(g.violations), n, strings.Join(g.violations[:n], "\n"))
	}
	return g.calls
}

// failoverNodeTimeout is the cluster-node-timeout the failover tests set on
// every node at run time (redistest starts clusters with 5000 ms), so that
// a failover takes a couple of seconds after a master dies. The other tests
// keep 5000 ms: on a loaded machine a node that stalls for a second would
// otherwise be marked failed, and a cluster without replicas then answers
// CLUSTERDOWN until it is back.
const failoverNodeTimeout = 1000 * time.Millisecond

// startCluster starts a cluster of 3 masters with replicasPerMaster replicas
// each and, if nodeTimeout is not zero, sets cluster-node-timeout on every
// node.
func startCluster(tb testing.TB, replicasPerMaster int, nodeTimeout time.Duration) *redistest.ClusterInstance {
	tb.Helper()
	c := redistest.ClusterWithReplicas(tb, 3, replicasPerMaster)
	if nodeTimeout == 0 {
		return c
	}
	for _, n := range c.Nodes() {
		if _, err := n.Do("CONFIG", "SET", "cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)); err != nil {
			tb.Fatalf("CONFIG SET cluster-node-timeout on %s: %v", n.Addr, err)
		}
	}
	return c
}

// info returns the fields of one INFO section of a node.
func info(tb testing.TB, n *redistest.Instance, section string) map[string]string {
	tb.Helper()
	reply, err := n.Do("INFO", section)
	if err != nil {
		tb.Fatalf("INFO %s on %s: %v", section, n.Addr, err)
	}
	out := map[string]string{}
	text, _ := reply.(string)
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok {
			out[k] = v
		}
	}
	return out
}

// commandCalls returns calls per command on n since the last CONFIG
// RESETSTAT, from INFO commandstats ("cmdstat_evalsha:calls=12,…").
// Commands that scripts run count too.
func commandCalls(tb testing.TB, n *redistest.Instance) map[string]int64 {
	tb.Helper()
	out := map[string]int64{}
	for k, v := range info(tb, n, "commandstats") {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if c, ok := strings.CutPrefix(f, "calls="); ok {
				out[name], _ = strconv.ParseInt(c, 10, 64)
			}
		}
	}
	return out
}

// resetStats zeroes the command statistics of every node of c.
func resetStats(tb testing.TB, c *redistest.ClusterInstance) {
	tb.Helper()
	for _, n := range c.Nodes() {
		if n.Pid() == 0 {
			continue
		}
		if _, err := n.Do("CONFIG", "RESETSTAT"); err != nil {
			tb.Fatalf("CONFIG RESETSTAT on %s: %v", n.Addr, err)
		}
	}
}

// scanned fails tb if any node ran a command that enumerates the keyspace.
func scanned(tb testing.TB, c *redistest.ClusterInstance) {
	tb.Helper()
	for _, n := range c.Nodes() {
		if n.Pid() == 0 {
			continue
		}
		calls := commandCalls(tb, n)
		for _, cmd := range []string{"keys", "scan", "randomkey", "dbsize"} {
			if calls[cmd] > 0 {
				tb.Errorf("%s ran %s %d times: no operation may enumerate the keyspace", n.Addr, strings.ToUpper(cmd), calls[cmd])
			}
		}
	}
}

// poll calls cond every interval until it returns true or timeout passes,
// and reports whether it did.
func poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// interceptEval returns s with its Eval traffic sent through fn, keeping
// s's other capabilities.
func interceptEval(s core.Store, fn func(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result) core.Store {
	return conformance.Intercept(s, conformance.Interceptor{Eval: fn})
}
