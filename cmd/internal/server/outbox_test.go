package server_test

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
	"github.com/presencekit/presence/internal/luascripts"
)

// refusingPublisher is a go-redis store whose deliveries (the calls of
// lua/outbox_ack.lua that publish a call's messages and acknowledge them)
// fail while refuse is set: the engine keeps the events in their outboxes.
type refusingPublisher struct {
	*goredis.Store
	refuse atomic.Bool
}

func (p *refusingPublisher) Eval(ctx context.Context, calls []core.Call) []core.Result {
	out := make([]core.Result, len(calls))
	var pass []core.Call
	var at []int
	for i, c := range calls {
		if p.refuse.Load() && delivers(c) {
			out[i].Err = errors.New("test: publish refused")
			continue
		}
		pass, at = append(pass, c), append(at, i)
	}
	for j, r := range p.Store.Eval(ctx, pass) {
		out[at[j]] = r
	}
	return out
}

// delivers reports whether c runs lua/outbox_ack.lua with messages to
// publish (its events as seq, channel, payload from ARGV[2]).
func delivers(c core.Call) bool {
	if s := luascripts.OutboxAck; c.SHA != s.SHA && c.Source != s.Source() {
		return false
	}
	for k := 1; k+2 < len(c.Args); k += 3 {
		if c.Args[k+1] != "" {
			return true
		}
	}
	return false
}

// TestOutboxWaitingGauge: presence_outbox_waiting counts the events that
// stay in the outboxes of several user buckets while publishing fails, and
// drops back to 0 once a sweep has delivered and acknowledged them.
func TestOutboxWaitingGauge(t *testing.T) {
	forEachBackend(t, func(t *testing.T, addr string) {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		store := &refusingPublisher{Store: goredis.New(c)}
		store.refuse.Store(true)
		// The engine's clock runs ahead by skew: moving it past
		// core.RedeliverAfter lets the server's sweeper redeliver.
		var skew atomic.Int64
		cfg := testConfig()
		cfg.Engine.Clock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		in := startServer(t, store, cfg)
		users := []string{"alice", "bob", "carol", "dave"}
		buckets := map[int]bool{}
		for _, u := range users {
			in.as(t, token(t, u)).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "web"}, nil)
			buckets[keyspace.New(cfg.Engine.Prefix, cfg.Engine.UserBuckets, 0).UserBucket(u)] = true
		}
		if len(buckets) < 2 {
			t.Fatalf("users %v share one bucket; pick users of several", users)
		}
		admin := token(t, "ops", "presence_admin")
		waitFor(t, 10*time.Second, "4 events waiting (each user's OFFLINE→ONLINE)", func() bool {
			return metric(t, in.url, admin, "presence_outbox_waiting") == 4
		})

		store.refuse.Store(false)
		skew.Store(int64(core.RedeliverAfter + time.Second))
		// Within RedeliverAfter of the beats: only the skew lets a sweep
		// find the events due again.
		waitFor(t, 5*time.Second, "the events delivered again and acknowledged", func() bool {
			return metric(t, in.url, admin, "presence_outbox_waiting") == 0
		})
		if n := metric(t, in.url, admin, `presence_engine_errors_total{op="publish"}`); n < 4 {
			t.Errorf("publish errors %v, want at least the 4 refused", n)
		}
	})
}

// metric returns the value of the sample named series (with its labels)
// on /metrics, -1 when there is none.
func metric(t *testing.T, url, tok, series string) float64 {
	t.Helper()
	res, body := send(t, "GET", url+"/metrics", "", map[string]string{"Authorization": "Bearer " + tok})
	if res.StatusCode != 200 {
		t.Fatalf("/metrics: %d", res.StatusCode)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %q", sc.Text())
			}
			return f
		}
	}
	return -1
}
