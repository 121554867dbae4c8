package core_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// flakyPublisher is a goredis Store whose deliveries (lua/outbox_ack.lua
// calls that publish) fail while down is set, and that records the
// messages each delivered.
type flakyPublisher struct {
	core.Store
	down    bool
	sent    []string
	batches []int // messages of each delivering call that went through
}

func (p *flakyPublisher) Eval(ctx context.Context, calls []core.Call) []core.Result {
	out := make([]core.Result, len(calls))
	var pass []core.Call
	var at []int
	for i, c := range calls {
		if scriptOf(c) == "outbox_ack" && deliveries(c) > 0 {
			if p.down {
				out[i].Err = errors.New("publish: connection refused")
				continue
			}
		}
		pass, at = append(pass, c), append(at, i)
	}
	for j, r := range p.Store.Eval(ctx, pass) {
		out[at[j]] = r
		if c := pass[j]; r.Err == nil && scriptOf(c) == "outbox_ack" {
			for k := 1; k+2 < len(c.Args); k += 3 {
				if c.Args[k+1] != "" {
					p.sent = append(p.sent, c.Args[k+2])
				}
			}
			if n := deliveries(c); n > 0 {
				p.batches = append(p.batches, n)
			}
		}
	}
	return out
}

// deliveries counts the messages an outbox_ack call publishes.
func deliveries(c core.Call) int {
	n := 0
	for k := 1; k+2 < len(c.Args); k += 3 {
		if c.Args[k+1] != "" {
			n++
		}
	}
	return n
}

// outboxRig returns a miniredis at t0, a clock at t0 that moves it, and a
// goredis Store over it.
func outboxRig(t *testing.T) (*miniredis.Miniredis, *manualClock, core.Store) {
	t.Helper()
	mr := miniredis.RunT(t)
	clk := &manualClock{t: t0}
	mr.SetTime(clk.t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	return mr, clk, goredis.New(c)
}

// outboxEntries counts the undelivered events in every user bucket's
// outbox (its fields but the counter and the epoch).
func outboxEntries(t *testing.T, mr *miniredis.Miniredis) int {
	t.Helper()
	n := 0
	for _, k := range mr.Keys() {
		if len(k) > 3 && k[len(k)-3:] == ":ob" {
			fields, err := mr.HKeys(k)
			if err != nil {
				t.Fatal(err)
			}
			n += len(fields) - 2
		}
	}
	return n
}

// TestOutboxDelivery steps through the outbox's life on named instants:
// a delivered event is acknowledged at once; one whose publish failed
// stays, is not delivered again before core.RedeliverAfter, is delivered
// by the first user sweep after it, with the same ID, and then only once.
func TestOutboxDelivery(t *testing.T) {
	ctx := context.Background()
	mr, clk, store := outboxRig(t)
	pub := &flakyPublisher{Store: store}
	e, err := core.New(pub, core.Config{Clock: clk.Now, CoalesceWindow: -1, LeaveDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	login := func(user string) {
		t.Helper()
		if _, err := e.Login(ctx, core.Login{User: user, Device: "web", Kind: core.KindWeb, Gateway: "gw"}); err != nil {
			t.Fatal(err)
		}
	}
	sweep := func() {
		t.Helper()
		if _, err := e.SweepUsers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name      string
		do        func()
		published int // messages out so far
		waiting   int // events in the outboxes after the step
	}{
		{"t0: alice logs in, her change is published and acknowledged", func() { login("alice") }, 1, 0},
		{"t0: Redis takes bob's login, the publish fails", func() { pub.down = true; login("bob") }, 1, 1},
		{"t0+1s: publishing works again; a sweep leaves bob's change to its engine", func() {
			pub.down = false
			clk.advance(mr, time.Second)
			sweep()
		}, 1, 1},
		{"t0+RedeliverAfter+1s: a sweep delivers bob's change and acknowledges it", func() {
			clk.advance(mr, core.RedeliverAfter)
			sweep()
		}, 2, 0},
		{"t0+RedeliverAfter+2s: the next sweep delivers nothing again", func() {
			clk.advance(mr, time.Second)
			sweep()
		}, 2, 0},
	}
	for _, s := range steps {
		s.do()
		if len(pub.sent) != s.published || outboxEntries(t, mr) != s.waiting {
			t.Fatalf("%s: %d published %v, %d waiting; want %d and %d", s.name, len(pub.sent), pub.sent,
				outboxEntries(t, mr), s.published, s.waiting)
		}
	}
	bob, err := core.UnmarshalChange([]byte(pub.sent[1]))
	if err != nil || bob.User != "bob" || bob.To != core.StatusOnline || !bob.At.Equal(t0) {
		t.Fatalf("delivered again: %+v %v, want bob's change to ONLINE at t0", bob, err)
	}
}

// TestRepeatsDropsSeenIDs: a reader's Repeats tells an ID seen among the
// last core.FeedMemory from one never seen or long forgotten.
func TestRepeatsDropsSeenIDs(t *testing.T) {
	var r core.Repeats
	if r.Repeat("u1.5.1") || !r.Repeat("u1.5.1") || r.Repeat("u1.5.2") {
		t.Fatal("a first sighting is new, a second a repeat")
	}
	if r.Repeat("") || r.Repeat("") {
		t.Fatal("an event without an ID is never a repeat")
	}
	for i := range core.FeedMemory {
		r.Repeat("x" + strconv.Itoa(i))
	}
	if r.Repeat("u1.5.1") {
		t.Fatalf("u1.5.1 is remembered past %d later IDs", core.FeedMemory)
	}
}

// TestRepeatsLossOncePerHealing: the buckets and engines that report one
// loss of Redis's data make one piece of news; a loss found after that
// healing has ended is another.
func TestRepeatsLossOncePerHealing(t *testing.T) {
	t0 := time.UnixMilli(1_772_366_400_000)
	loss := func(at, until time.Duration) core.Loss { return core.Loss{At: t0.Add(at), Until: t0.Add(until)} }
	var r core.Repeats
	for _, step := range []struct {
		name string
		l    core.Loss
		news bool
	}{
		{"the first bucket's", loss(0, 2*time.Minute), true},
		{"another bucket's, a moment later", loss(time.Second, 2*time.Minute+time.Second), false},
		{"another engine's, late in the healing", loss(119*time.Second, 4*time.Minute), false},
		{"one after the healing", loss(3*time.Minute, 5*time.Minute), true},
	} {
		if got := r.Lost(step.l); got != step.news {
			t.Fatalf("%s loss: news %v, want %v", step.name, got, step.news)
		}
	}
}

// TestOutboxRedeliveredOncePerPass: every step of a bucket's sweep reports
// the events still waiting in its outbox; a pass of several steps
// delivers each of them once.
func TestOutboxRedeliveredOncePerPass(t *testing.T) {
	ctx := context.Background()
	mr, clk, store := outboxRig(t)
	pub := &flakyPublisher{Store: store}
	e, err := core.New(pub, core.Config{Clock: clk.Now, CoalesceWindow: -1, LeaveDelay: -1, UserBuckets: 1, SweepBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"u1", "u2", "u3", "bob"} {
		pub.down = u == "bob" // bob's change waits in the outbox
		if _, err := e.Login(ctx, core.Login{User: u, Device: "web", Kind: core.KindWeb, Meta: bigMeta}); err != nil {
			t.Fatal(err)
		}
	}
	pub.down, pub.sent = false, nil
	clk.advance(mr, 2*time.Minute) // every device expired: a pass of several one-user steps
	r, err := e.SweepUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	online := 0
	for _, m := range pub.sent {
		if ch, err := core.UnmarshalChange([]byte(m)); err == nil && ch.User == "bob" && ch.To == core.StatusOnline {
			online++
		}
	}
	if r.Steps < 4 || online != 1 {
		t.Fatalf("a pass of %d steps delivered bob's waiting change %d times, want once", r.Steps, online)
	}
}

// TestOutboxBatchPublish: an engine delivers the changes of one call
// together, its messages and their acknowledgement in one call per bucket;
// a failed delivery leaves every event of it in the outbox, for a later
// sweep to deliver.
func TestOutboxBatchPublish(t *testing.T) {
	ctx := context.Background()
	mr, clk, store := outboxRig(t)
	pub := &flakyPublisher{Store: store}
	e, err := core.New(pub, core.Config{Clock: clk.Now, CoalesceWindow: -1, LeaveDelay: -1, UserBuckets: 1})
	if err != nil {
		t.Fatal(err)
	}
	const users = 30
	beats := make([]core.Heartbeat, users)
	for i := range beats {
		beats[i] = core.Heartbeat{User: "u" + strconv.Itoa(i), Device: "web", Kind: core.KindWeb, Active: true}
	}
	published := func() int {
		n := 0
		for _, b := range pub.batches {
			n += b
		}
		return n
	}
	steps := []struct {
		name      string
		do        func()
		batches   int // delivering calls that went through
		published int
		waiting   int // events in the outbox after the step
	}{
		{"t0: a batch of beats brings 30 users online: one batch of 30", func() {
			if _, err := e.HeartbeatBatch(ctx, beats); err != nil {
				t.Fatal(err)
			}
		}, 1, users, 0},
		{"t0+2m: publishing fails while a sweep finds them all gone", func() {
			pub.down = true
			clk.advance(mr, 2*time.Minute)
			if _, err := e.SweepUsers(ctx); err != nil {
				t.Fatal(err)
			}
		}, 1, users, users},
		{"t0+2m+RedeliverAfter+1s: a sweep delivers the 30 OFFLINE changes", func() {
			pub.down = false
			clk.advance(mr, core.RedeliverAfter+time.Second)
			if _, err := e.SweepUsers(ctx); err != nil {
				t.Fatal(err)
			}
		}, 2, 2 * users, 0},
	}
	for _, s := range steps {
		s.do()
		if len(pub.batches) != s.batches || published() != s.published || outboxEntries(t, mr) != s.waiting {
			t.Fatalf("%s: batches %v (%d published), %d waiting; want %d batches, %d published, %d waiting",
				s.name, pub.batches, published(), outboxEntries(t, mr), s.batches, s.published, s.waiting)
		}
	}
}
