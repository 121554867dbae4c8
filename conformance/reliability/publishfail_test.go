package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/internal/redistest"
)

// A publish that fails is the outbox's third case besides a lost reply and
// a crash (outbox_test.go): the Store answers the publish with an error.
// The state change is committed, so the call succeeds (docs/design.md §7:
// a failed publish is logged and counted, not returned); its events stay in
// the outbox, unacknowledged, and a user sweep past core.RedeliverAfter
// delivers each once, under the outbox ID it had. An engine that
// acknowledged them anyway would drop them for good.

// errPublish is what the failing publisher answers.
var errPublish = errors.New("publish refused by the test")

// failingPublish refuses every publication while on is set, and records the
// outbox IDs of the messages it refused.
type failingPublish struct {
	on atomic.Bool

	mu      sync.Mutex
	refused []string // outbox IDs
}

func (f *failingPublish) refuse(msgs ...[]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		f.refused = append(f.refused, messageID(m))
	}
	return errPublish
}

func (f *failingPublish) refusedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.refused)
}

// failDeliveries is an Interceptor's Eval that fails, while f is on, every
// delivering call (lua/outbox_ack.lua with messages to publish: its events
// as seq, channel, payload from ARGV[2]) and records its messages; it
// counts the calls it failed in n.
func failDeliveries(f *failingPublish, n *atomic.Int64) func(context.Context, []core.Call, func(context.Context, []core.Call) []core.Result) []core.Result {
	return func(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result {
		out := make([]core.Result, len(calls))
		var pass []core.Call
		var at []int
		for i, c := range calls {
			var msgs [][]byte
			if isDelivery(c) {
				for k := 1; k+2 < len(c.Args); k += 3 {
					if c.Args[k+1] != "" {
						msgs = append(msgs, []byte(c.Args[k+2]))
					}
				}
			}
			if len(msgs) > 0 && f.on.Load() {
				n.Add(1)
				out[i].Err = f.refuse(msgs...)
				continue
			}
			pass, at = append(pass, c), append(at, i)
		}
		for j, r := range next(ctx, pass) {
			out[at[j]] = r
		}
		return out
	}
}

// isDelivery reports whether c runs lua/outbox_ack.lua.
func isDelivery(c core.Call) bool {
	s := luascripts.OutboxAck
	return c.SHA == s.SHA || c.Source == s.Source()
}

// outboxIDs returns the outbox fields (event sequence numbers) of every
// user bucket under prefix, as "key/field": what is still undelivered.
func outboxIDs(t *testing.T, srv *redistest.Instance, prefix string) []string {
	t.Helper()
	var out []string
	for _, k := range rig.Keys(t, srv) {
		if !strings.HasPrefix(k, prefix+":{u") || !strings.HasSuffix(k, "}:ob") {
			continue
		}
		fields, _ := rig.Do(t, srv, "HKEYS", k).([]any)
		for _, f := range fields {
			if s := fmt.Sprint(f); s != "#" && s != "@" { // the counter and the epoch
				out = append(out, k+"/"+s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestFailedPublishLeftToTheSweep: on each driver, with the delivering
// calls (publication and acknowledgement, lua/outbox_ack.lua) failing, a
// heartbeat batch that
// brings three users online returns their changes without an error; the
// three events stay in the outbox; once publishing works again, a user
// sweep past core.RedeliverAfter delivers each to a subscriber once, with
// the outbox ID of the message that failed, and acknowledges them.
func TestFailedPublishLeftToTheSweep(t *testing.T) {
	srv := redistest.Server(t)
	loadScripts(t, srv)
	users := []string{"a", "b", "c"}
	ways := []struct {
		name string
		// wrap returns the failing Store and a count of the delivering
		// calls it refused
		wrap func(core.Store, *failingPublish) (core.Store, func() int64)
	}{
		{"delivery", func(s core.Store, f *failingPublish) (core.Store, func() int64) {
			var n atomic.Int64
			return conformance.Intercept(s, conformance.Interceptor{Eval: failDeliveries(f, &n)}), n.Load
		}},
	}
	for _, a := range rig.Adapters() {
		for _, w := range ways {
			t.Run(a.Name+"/"+w.name, func(t *testing.T) {
				prefix := "pf-" + a.Name + "-" + strings.ReplaceAll(w.name, " ", "-")
				ctx := bounded(t, settle)
				clk := rig.NewClock(rig.T0)
				cfg := outboxConfig(clk)
				cfg.Prefix = prefix
				f := &failingPublish{}
				f.on.Store(true)
				store, refusedCalls := w.wrap(a.Open(t, srv.Addr), f)
				eng := rig.Engine(t, store, cfg)

				// the subscriber: on a direct connection, on the raw channel
				// (a Feed would hide a repeat)
				direct := rig.OpenGoredis(t, srv.Addr)
				channel := rig.Engine(t, direct, core.Config{Prefix: prefix}).ChangeChannel()
				msgs, stop, err := direct.(core.Subscriber).Subscribe(ctx, channel)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { stop() })

				beats := make([]core.Heartbeat, len(users))
				for i, u := range users {
					beats[i] = core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb, Active: true}
				}
				acks, err := eng.HeartbeatBatch(ctx, beats)
				if err != nil {
					t.Fatalf("the heartbeat batch failed with its publish: %v (the change is committed: it must succeed)", err)
				}
				for i, ack := range acks {
					if ack.Err != nil || len(ack.Changes) != 1 || ack.Changes[0].To != core.StatusOnline {
						t.Fatalf("%s: ack %+v, want the change to ONLINE", users[i], ack)
					}
				}
				if refusedCalls() == 0 {
					t.Fatalf("no %s was refused: the test did not test", w.name)
				}
				refused := f.refusedIDs()
				if len(refused) != len(users) || slices.Contains(refused, "") {
					t.Fatalf("refused messages with IDs %q, want one outbox ID for each of %d users", refused, len(users))
				}
				if left := outboxIDs(t, srv, prefix); len(left) != len(users) {
					t.Fatalf("after the failed publish the outbox holds %v, want the %d events", left, len(users))
				}

				f.on.Store(false)
				clk.Add(core.RedeliverAfter + time.Second)
				for range 2 { // the second sweep finds them acknowledged
					if _, err := eng.SweepUsers(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if left := outboxIDs(t, srv, prefix); len(left) != 0 {
					t.Errorf("after the sweeps the outbox still holds %v", left)
				}
				got := deliveredIDs(t, ctx, msgs, eng, users)
				slices.Sort(got)
				slices.Sort(refused)
				if !slices.Equal(got, refused) {
					t.Fatalf("the subscriber got the events with IDs %q, want each of the refused IDs %q once", got, refused)
				}
			})
		}
	}
}

// deliveredIDs reads msgs until a sentinel change, published after
// everything the test did (messages of one channel arrive in order), and
// returns the outbox IDs of the changes of users before it, repeats
// included.
func deliveredIDs(t *testing.T, ctx context.Context, msgs <-chan core.Message, eng *core.Engine, users []string) []string {
	t.Helper()
	const sentinel = "sentinel-user"
	if _, err := eng.Login(ctx, core.Login{User: sentinel, Device: "web", Kind: core.KindWeb}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("no sentinel: %v (IDs so far: %q)", ctx.Err(), got)
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the subscription ended (IDs so far: %q)", got)
			}
			c, err := changeOf(m.Payload)
			if err != nil {
				t.Fatalf("message %s: %v", m.Payload, err)
			}
			switch {
			case c.User == sentinel:
				return got
			case slices.Contains(users, c.User):
				got = append(got, messageID(m.Payload))
			}
		}
	}
}

// changeOf decodes a message of the change channel, in the JSON the engine
// publishes (docs/design.md §7): its user, and statuses that are core's.
func changeOf(msg []byte) (core.Change, error) {
	var w struct {
		User     string `json:"user"`
		From, To string
	}
	if err := json.Unmarshal(msg, &w); err != nil {
		return core.Change{}, err
	}
	from, ok1 := core.Parse[core.Status](w.From)
	to, ok2 := core.Parse[core.Status](w.To)
	if w.User == "" || !ok1 || !ok2 {
		return core.Change{}, fmt.Errorf("not a change")
	}
	return core.Change{User: w.User, From: from, To: to}, nil
}

// messageID returns a published message's outbox ID ("" for none).
func messageID(msg []byte) string {
	var w struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(msg, &w) // a message that is no JSON has no ID
	return w.ID
}
