package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/slot"
)

// Sizes of the sweep test: the default bucket counts, so that the buckets'
// slots fall on every master.
const (
	sweepUsers  = 64
	sweepScopes = 12
	sweepPer    = 20 // members per scope
)

// TestSweepVisitsEveryMaster checks, through every adapter on a 3-master
// cluster, that one SweepUsers and one SweepScopes pass reach every master:
// each master runs the sweep scripts (EVALSHA) and reads its buckets' due
// index or registry (ZRANGEBYSCORE, counted in INFO commandstats, which
// counts commands run by scripts) at least once per bucket it serves; that
// they settle every expired user and remove every expired member (scopes
// exact, compact, and compact spread over slots); and that no node ever
// runs KEYS, SCAN or RANDOMKEY.
func TestSweepVisitsEveryMaster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, 0)
	for _, tg := range ClusterTargets(c.Addrs()) {
		t.Run(tg.Adapter, func(t *testing.T) {
			ctx := context.Background()
			be, err := tg.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Close() })
			var log batchLog
			var guard slotGuard
			clk := newVClock()
			cfg := core.Config{
				Prefix: "sweep-" + tg.Adapter,
				Classes: map[string]core.ScopeClass{
					"room":  {Layout: core.LayoutExact},
					"video": {Layout: core.LayoutCompact, Window: 10 * time.Minute, SweepInterval: time.Minute, Shards: 8},
					"live":  {Layout: core.LayoutCompact, Window: 10 * time.Minute, SweepInterval: time.Minute, Shards: 8, Spread: true},
				},
				KeyGrace: longGrace,
				CountTTL: longGrace,
				Clock:    clk.Now,
			}
			eng, err := core.New(guard.wrap(log.wrap(be.Store)), cfg)
			if err != nil {
				t.Fatal(err)
			}
			beats := make([]core.Heartbeat, sweepUsers)
			for i := range beats {
				beats[i] = core.Heartbeat{User: "user-" + strconv.Itoa(i), Device: "d", Kind: core.KindWeb, Active: true}
			}
			if _, err := eng.HeartbeatBatch(ctx, beats); err != nil {
				t.Fatal(err)
			}
			var touches []core.ScopeTouch
			for s := range sweepScopes {
				sc := core.Scope{Class: []string{"room", "video", "live"}[s%3], ID: "s" + strconv.Itoa(s)}
				for m := range sweepPer {
					touches = append(touches, core.ScopeTouch{Scope: sc, Member: "m" + strconv.Itoa(m)})
				}
			}
			if err := eng.TouchBatch(ctx, touches); err != nil {
				t.Fatal(err)
			}

			// Everyone's window has passed.
			clk.advance(11 * time.Minute)
			resetStats(t, c)
			log.take()
			users, err := eng.SweepUsers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			scopes, err := eng.SweepScopes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if users.Visited != sweepUsers {
				t.Errorf("SweepUsers settled %d users, want %d", users.Visited, sweepUsers)
			}
			if want := sweepScopes * sweepPer; scopes.Removed != want {
				t.Errorf("SweepScopes removed %d members, want %d", scopes.Removed, want)
			}

			// Each bucket's step names its bucket's keys: map buckets to masters.
			perMaster := map[string]int{} // master → buckets it serves (users and scopes)
			seen := map[uint16]bool{}
			for _, batch := range log.take() {
				for _, keys := range batch {
					if len(keys) < 3 || seen[slot.Of(keys[0])] {
						continue // not a bucket step (3 keys: index, state, lock)
					}
					seen[slot.Of(keys[0])] = true
					m, err := c.MasterFor(keys[0])
					if err != nil {
						t.Fatal(err)
					}
					perMaster[m.Addr]++
				}
			}
			if len(seen) != 32 {
				t.Errorf("the sweeps named %d bucket slots, want 16 user and 16 scope buckets", len(seen))
			}
			if len(perMaster) != len(c.Masters()) {
				t.Fatalf("the default buckets fall on %d masters (%v); the test proves nothing", len(perMaster), perMaster)
			}
			for _, m := range c.Masters() {
				calls := commandCalls(t, m)
				scripts := calls["evalsha"] + calls["eval"]
				t.Logf("%s: %d buckets, %d script calls, %d ZRANGEBYSCORE, %d HDEL, %d ZREM", m.Addr, perMaster[m.Addr], scripts, calls["zrangebyscore"], calls["hdel"], calls["zrem"])
				if scripts == 0 {
					t.Errorf("master %s ran no sweep script", m.Addr)
				}
				if calls["zrangebyscore"] < int64(perMaster[m.Addr]) {
					t.Errorf("master %s read its due indexes and registries %d times, want at least once for each of its %d buckets", m.Addr, calls["zrangebyscore"], perMaster[m.Addr])
				}
			}
			scanned(t, c)
			guard.check(t)
			if t.Failed() {
				t.Logf("users %+v\nscopes %+v", users, scopes)
			}
		})
	}
}
