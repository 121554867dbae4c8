package storetest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/slot"
)

// Timeout bounds every wait of the checks: one Eval, one message.
const Timeout = 10 * time.Second

// SHA1 returns the hex SHA1 of a script, the name EVALSHA knows it by.
func SHA1(source string) string {
	sum := sha1.Sum([]byte(source))
	return hex.EncodeToString(sum[:])
}

// unknownSHA is a SHA1 no script has.
const unknownSHA = "0000000000000000000000000000000000000000"

// Eval runs calls on s with a bounded context and checks that one Result
// came back per call.
func Eval(tb testing.TB, s core.Store, calls ...core.Call) []core.Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	results := s.Eval(ctx, calls)
	if len(results) != len(calls) {
		tb.Fatalf("Eval: %d results for %d calls", len(results), len(calls))
	}
	return results
}

// EvalOne runs one call and fails the test on an error.
func EvalOne(tb testing.TB, s core.Store, call core.Call) core.Value {
	tb.Helper()
	r := Eval(tb, s, call)[0]
	if r.Err != nil {
		tb.Fatalf("Eval(%q): %v", call.Source+call.SHA, r.Err)
	}
	return r.Value
}

// wantValue fails unless r is exactly want.
func wantValue(tb testing.TB, what string, r core.Result, want core.Value) {
	tb.Helper()
	if r.Err != nil {
		tb.Fatalf("%s: error %v, want %s", what, r.Err, want)
	}
	if !reflect.DeepEqual(normal(r.Value), normal(want)) {
		tb.Fatalf("%s: got %s (%#v), want %s", what, r.Value, r.Value, want)
	}
}

// normal makes empty and nil arrays compare equal.
func normal(v core.Value) core.Value {
	if v.Kind == core.ValueArray {
		items := make([]core.Value, len(v.Array))
		for i, item := range v.Array {
			items[i] = normal(item)
		}
		v.Array = items
	}
	return v
}

// tag returns a hash tag unique to the test, so that checks sharing a server
// never share keys.
func tag(tb testing.TB) string { return "{" + unique(tb) + "}" }

// unique returns a name unique to the test and the run, without braces.
func unique(tb testing.TB) string {
	return strings.NewReplacer("/", ":", " ", "_", "{", "(", "}", ")").Replace(tb.Name()) + fmt.Sprint(time.Now().UnixNano())
}

// Short forms of the replies the tables expect.
func i(n int64) core.Value             { return core.Value{Kind: core.ValueInt, Int: n} }
func st(s string) core.Value           { return core.Value{Kind: core.ValueString, Str: s} }
func a(items ...core.Value) core.Value { return core.Value{Kind: core.ValueArray, Array: items} }

var ni = core.Value{}

// Run checks the reply mapping and error contract of s. The server behind s
// must be empty of the test's keys; a single node or a cluster will do.
func Run(t *testing.T, s core.Store) {
	t.Run("Replies", func(t *testing.T) { replies(t, s) })
	t.Run("EvalSHA", func(t *testing.T) { evalSHA(t, s) })
	t.Run("Errors", func(t *testing.T) { scriptErrors(t, s) })
	t.Run("Batch", func(t *testing.T) { batch(t, s) })
	t.Run("CrossSlot", func(t *testing.T) { crossSlot(t, s) })
	t.Run("Empty", func(t *testing.T) {
		if got := s.Eval(context.Background(), nil); len(got) != 0 {
			t.Fatalf("Eval(nil) = %v", got)
		}
	})
	t.Run("CanceledContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		results := s.Eval(ctx, []core.Call{{Source: "return 1"}, {Source: "return 2"}})
		for k, r := range results {
			if r.Err == nil {
				t.Fatalf("call %d on a canceled context: got %s, want an error", k, r.Value)
			}
		}
	})
}

func replies(t *testing.T, s core.Store) {
	k := tag(t)
	cases := []struct {
		name string
		call core.Call
		want core.Value
	}{
		{"int", core.Call{Source: "return 42"}, i(42)},
		{"negative int", core.Call{Source: "return -7"}, i(-7)},
		{"lua number truncates", core.Call{Source: "return 3.99"}, i(3)},
		{"string", core.Call{Source: "return 'hello'"}, st("hello")},
		{"empty string", core.Call{Source: "return ''"}, st("")},
		{"integer-looking string", core.Call{Source: "return '17'"}, st("17")},
		{"false is nil", core.Call{Source: "return false"}, ni},
		{"missing key is nil", core.Call{Source: "return redis.call('GET', KEYS[1])", Keys: []string{k + "missing"}}, ni},
		{"status reply", core.Call{Source: "return redis.status_reply('OK')"}, st("OK")},
		{"other status reply", core.Call{Source: "return redis.status_reply('PONG')"}, st("PONG")},
		{"status from redis.call", core.Call{Source: "return redis.call('SET', KEYS[1], ARGV[1])", Keys: []string{k + "s"}, Args: []string{"v"}}, st("OK")},
		{"bulk from redis.call", core.Call{Source: "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])", Keys: []string{k + "g"}, Args: []string{"value"}}, st("value")},
		{"nested arrays", core.Call{Source: "return {1, 'two', {3, {'four'}}, {}}"}, a(i(1), st("two"), a(i(3), a(st("four"))), a())},
		{"nil inside array", core.Call{Source: "return {1, false, 'x'}"}, a(i(1), ni, st("x"))},
		{"empty array", core.Call{Source: "return {}"}, a()},
		{"keys and args", core.Call{
			Source: "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}",
			Keys:   []string{k + "a", k + "b"},
			Args:   []string{"x", "\x00bin\xff\r\n"},
		}, a(st(k+"a"), st(k+"b"), st("x"), st("\x00bin\xff\r\n"), i(2), i(2))},
		{"args only", core.Call{Source: "return ARGV[1] .. ARGV[2]", Args: []string{"ab", "cd"}}, st("abcd")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantValue(t, c.name, Eval(t, s, c.call)[0], c.want)
		})
	}
	t.Run("all in one batch", func(t *testing.T) {
		calls := make([]core.Call, len(cases))
		for n, c := range cases {
			calls[n] = c.call
		}
		for n, r := range Eval(t, s, calls...) {
			wantValue(t, cases[n].name, r, cases[n].want)
		}
	})
}

func evalSHA(t *testing.T, s core.Store) {
	k := tag(t)
	// A script text unique to this run, so that no earlier run loaded it.
	src := fmt.Sprintf("-- %s\nreturn {KEYS[1], ARGV[1]}", k)
	sha := SHA1(src)
	r := Eval(t, s, core.Call{SHA: sha, Keys: []string{k}, Args: []string{"1"}})[0]
	if !errors.Is(r.Err, core.ErrNoScript) {
		t.Fatalf("EVALSHA before loading: got %v %v, want ErrNoScript", r.Value, r.Err)
	}
	results := Eval(t, s,
		core.Call{Source: src, Keys: []string{k}, Args: []string{"1"}},
		core.Call{SHA: sha, Keys: []string{k}, Args: []string{"2"}},
	)
	wantValue(t, "EVAL", results[0], a(st(k), st("1")))
	wantValue(t, "EVALSHA after EVAL", results[1], a(st(k), st("2")))

	r = Eval(t, s, core.Call{SHA: unknownSHA, Keys: []string{k}})[0]
	if !errors.Is(r.Err, core.ErrNoScript) || errors.Is(r.Err, core.ErrUnavailable) {
		t.Fatalf("EVALSHA of an unknown SHA: got %v, want ErrNoScript only", r.Err)
	}
}

func scriptErrors(t *testing.T, s core.Store) {
	cases := []struct {
		name, src, contains string
	}{
		{"error_reply", "return redis.error_reply('MYERR boom')", "boom"},
		{"runtime error", "error('kaboom')", "kaboom"},
		{"unknown command", "return redis.call('NOSUCHCOMMAND')", ""},
		{"wrong type", "redis.call('SET', KEYS[1], 'x'); return redis.call('HGET', KEYS[1], 'f')", "WRONGTYPE"},
		{"error nested in array", "return {1, redis.error_reply('INNER nested')}", "nested"},
	}
	k := tag(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Eval(t, s, core.Call{Source: c.src, Keys: []string{k + c.name}})[0]
			if r.Err == nil {
				t.Fatalf("got %s, want an error", r.Value)
			}
			if errors.Is(r.Err, core.ErrNoScript) || errors.Is(r.Err, core.ErrUnavailable) || errors.Is(r.Err, core.ErrCrossSlot) {
				t.Fatalf("a script error must match no sentinel, got %v", r.Err)
			}
			if !strings.Contains(r.Err.Error(), c.contains) {
				t.Fatalf("error %q does not mention %q", r.Err, c.contains)
			}
		})
	}
}

func batch(t *testing.T, s core.Store) {
	k := tag(t)
	incr := core.Call{Source: "return redis.call('INCR', KEYS[1])", Keys: []string{k + "n"}}
	results := Eval(t, s,
		core.Call{Source: "return 1"},
		core.Call{SHA: unknownSHA},
		incr,
		core.Call{Source: "return redis.error_reply('MYERR middle')"},
		incr,
		core.Call{Source: "return 'last'"},
	)
	wantValue(t, "first", results[0], i(1))
	if !errors.Is(results[1].Err, core.ErrNoScript) {
		t.Fatalf("second: got %v, want ErrNoScript", results[1].Err)
	}
	wantValue(t, "third", results[2], i(1))
	if results[3].Err == nil || !strings.Contains(results[3].Err.Error(), "middle") {
		t.Fatalf("fourth: got %v, want the script's error", results[3].Err)
	}
	wantValue(t, "fifth", results[4], i(2))
	wantValue(t, "sixth", results[5], st("last"))
}

func crossSlot(t *testing.T, s core.Store) {
	k := tag(t)
	set := "redis.call('SET', KEYS[1], 'written'); return 1"
	calls := []core.Call{
		{Source: "return 'before'"},
		{Source: set, Keys: []string{"{slot-a}" + k, "{slot-b}" + k}},
		{SHA: SHA1(set), Keys: []string{"{slot-a}" + k + "x", "{slot-b}" + k + "x"}},
		{Source: "return 'after'"},
	}
	results := Eval(t, s, calls...)
	wantValue(t, "before", results[0], st("before"))
	wantValue(t, "after", results[3], st("after"))
	for n, r := range results[1:3] {
		if !errors.Is(r.Err, core.ErrCrossSlot) {
			t.Fatalf("cross-slot call: got %v %v, want ErrCrossSlot", r.Value, r.Err)
		}
		if want := slot.Check(calls[1+n].Keys); r.Err.Error() != want.Error() {
			t.Fatalf("cross-slot error %q is not slot.Check's (%q)", r.Err, want)
		}
	}
	got := EvalOne(t, s, core.Call{Source: "return redis.call('GET', KEYS[1])", Keys: []string{"{slot-a}" + k}})
	if got.Kind != core.ValueNil {
		t.Fatalf("the refused call was sent: key holds %s", got)
	}
}

// CheckUnavailable checks that s, whose server has been stopped or killed,
// reports every call, and a publish where s can, as core.ErrUnavailable.
func CheckUnavailable(t *testing.T, s core.Store) {
	t.Helper()
	for k, r := range Eval(t, s, core.Call{Source: "return 1"}, core.Call{SHA: unknownSHA, Keys: []string{"k"}}) {
		if !errors.Is(r.Err, core.ErrUnavailable) {
			t.Fatalf("call %d to a dead server: got %v %v, want ErrUnavailable", k, r.Value, r.Err)
		}
		if errors.Is(r.Err, core.ErrNoScript) {
			t.Fatalf("call %d to a dead server matches ErrNoScript: %v", k, r.Err)
		}
	}
	if p, ok := s.(core.Publisher); ok {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		if err := p.Publish(ctx, "ch", []byte("x")); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("Publish to a dead server: got %v, want ErrUnavailable", err)
		}
	}
}

// RunPubSub checks a Publish/Subscribe round trip through s, which must
// implement core.Publisher and core.Subscriber.
func RunPubSub(t *testing.T, s core.Store) {
	pub, ok := s.(core.Publisher)
	if !ok {
		t.Fatalf("%T does not implement core.Publisher", s)
	}
	sub, ok := s.(core.Subscriber)
	if !ok {
		t.Fatalf("%T does not implement core.Subscriber", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	// One tag: in a cluster both channels then publish through one node,
	// which keeps their order.
	k := tag(t)
	ch1, ch2 := k+"one", k+"two"

	t.Run("RoundTrip", func(t *testing.T) {
		msgs, stop, err := sub.Subscribe(ctx, ch1, ch2)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		sent := []core.Message{
			{Channel: ch2, Payload: []byte("hello")},
			{Channel: ch1, Payload: []byte("\x00bin\xff")},
			{Channel: ch2, Payload: []byte{}},
		}
		for _, m := range sent {
			if err := pub.Publish(ctx, m.Channel, m.Payload); err != nil {
				t.Fatal(err)
			}
		}
		for n, want := range sent {
			select {
			case got, ok := <-msgs:
				if !ok {
					t.Fatalf("channel closed after %d messages", n)
				}
				if got.Channel != want.Channel || string(got.Payload) != string(want.Payload) {
					t.Fatalf("message %d: got %q on %q, want %q on %q", n, got.Payload, got.Channel, want.Payload, want.Channel)
				}
			case <-ctx.Done():
				t.Fatalf("message %d not received", n)
			}
		}
		if err := stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
		waitClosed(t, msgs)
		if err := stop(); err != nil {
			t.Fatalf("second stop: %v", err)
		}
	})

	t.Run("Batch", func(t *testing.T) {
		bp, ok := s.(core.BatchPublisher)
		if !ok {
			t.Fatalf("%T does not implement core.BatchPublisher", s)
		}
		// Channels of their own: in a cluster, RoundTrip's messages may
		// still be crossing the cluster bus to the node this subscribes on.
		// One of another tag lives, most likely, on another node.
		k := tag(t)
		ch1, ch2, ch3 := k+"one", k+"two", "{"+unique(t)+"x}three"
		msgs, stop, err := sub.Subscribe(ctx, ch1, ch2, ch3)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		if err := bp.PublishBatch(ctx, nil); err != nil {
			t.Fatalf("an empty batch: %v", err)
		}
		want := map[string][]string{}
		var sent []core.Message
		for i := range 60 {
			ch := []string{ch1, ch2, ch3}[i%3]
			sent = append(sent, core.Message{Channel: ch, Payload: []byte(strconv.Itoa(i))})
			want[ch] = append(want[ch], strconv.Itoa(i))
		}
		if err := bp.PublishBatch(ctx, sent); err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for n := range sent {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("channel closed after %d messages", n)
				}
				got[m.Channel] = append(got[m.Channel], string(m.Payload))
			case <-ctx.Done():
				t.Fatalf("%d of %d messages received: %v", n, len(sent), got)
			}
		}
		for ch, w := range want {
			if !slices.Equal(got[ch], w) {
				t.Errorf("on %q got %v, want %v in that order", ch, got[ch], w)
			}
		}
	})

	t.Run("ContextEnds", func(t *testing.T) {
		subCtx, subCancel := context.WithCancel(ctx)
		msgs, stop, err := sub.Subscribe(subCtx, ch1)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		subCancel()
		waitClosed(t, msgs)
	})

	t.Run("NoReaderDoesNotBlockPublish", func(t *testing.T) {
		_, stop, err := sub.Subscribe(ctx, ch1)
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			if err := pub.Publish(ctx, ch1, []byte("unread")); err != nil {
				t.Fatal(err)
			}
		}
		wantValue(t, "Eval while a subscriber lags", Eval(t, s, core.Call{Source: "return 1"})[0], i(1))
		stopped := make(chan error, 1)
		go func() { stopped <- stop() }()
		select {
		case <-stopped:
		case <-time.After(Timeout):
			t.Fatal("stop blocked with unread messages")
		}
	})
}

// waitClosed waits until msgs is closed, draining it.
func waitClosed(tb testing.TB, msgs <-chan core.Message) {
	tb.Helper()
	timeout := time.After(Timeout)
	for {
		select {
		case _, ok := <-msgs:
			if !ok {
				return
			}
		case <-timeout:
			tb.Fatal("message channel not closed")
		}
	}
}

// RunCluster checks that s, built over every node of c, sends each call to
// the master that serves its keys: many hash tags in one batch, each writing
// its keys, which must then be on the master CLUSTER SLOTS names.
func RunCluster(t *testing.T, s core.Store, c *redistest.ClusterInstance) {
	k := unique(t)
	const n = 24
	src := "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return {KEYS[1], ARGV[1]}"
	var calls []core.Call
	for j := range n {
		key := fmt.Sprintf("{%s-%d}", k, j)
		calls = append(calls, core.Call{Source: src, Keys: []string{key + ":a", key + ":b"}, Args: []string{fmt.Sprint(j)}})
	}
	// Cross-slot and NOSCRIPT still behave in a cluster, amid routed calls.
	calls = append(calls,
		core.Call{Source: src, Keys: []string{"{x}" + k, "{y}" + k}, Args: []string{"no"}},
		core.Call{SHA: unknownSHA, Keys: []string{"{z}" + k}},
		core.Call{SHA: SHA1(src), Keys: []string{calls[0].Keys[0], calls[0].Keys[1]}, Args: []string{"again"}},
	)
	results := Eval(t, s, calls...)
	for j := range n {
		wantValue(t, fmt.Sprintf("call %d", j), results[j], a(st(calls[j].Keys[0]), st(fmt.Sprint(j))))
	}
	if !errors.Is(results[n].Err, core.ErrCrossSlot) {
		t.Fatalf("cross-slot call in a cluster: got %v", results[n].Err)
	}
	if !errors.Is(results[n+1].Err, core.ErrNoScript) {
		t.Fatalf("EVALSHA of an unknown SHA in a cluster: got %v", results[n+1].Err)
	}
	wantValue(t, "EVALSHA after EVAL in the same batch", results[n+2], a(st(calls[0].Keys[0]), st("again")))

	nodes := map[string]bool{}
	for j := range n {
		for _, key := range calls[j].Keys {
			master, err := c.MasterFor(key)
			if err != nil {
				t.Fatal(err)
			}
			nodes[master.Addr] = true
			want := fmt.Sprint(j)
			if j == 0 {
				want = "again"
			}
			got, err := master.Do("GET", key)
			if err != nil || got != want {
				t.Fatalf("GET %s on its master %s: %v %v, want %q", key, master.Addr, got, err, want)
			}
		}
	}
	if len(nodes) < 2 {
		t.Fatalf("the keys all landed on %v: the check proves no routing", nodes)
	}
}
