package host_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/host"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestEngineBasics(t *testing.T) {
	ctx := context.Background()
	store, mr := miniStore(t, t0)
	clk := &clock{t: t0}
	eng, err := instanceT(t, store).Configure(ctx, core.Config{Clock: clk.Now}, host.EngineOptions{Seed: "basics"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := opdo.Do[core.Ack](ctx, eng, core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Active: true})
	if err != nil {
		t.Fatal(err)
	}
	if ack.Token == "" || len(ack.Changes) != 0 {
		t.Fatalf("ack %+v", ack)
	}
	clk.set(t0.Add(2 * time.Second))
	mr.SetTime(clk.Now())
	r, err := opdo.Do[core.SweepReport](ctx, eng, core.SweepUsers{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Changes) != 1 || r.Changes[0].To != core.StatusOnline {
		t.Fatalf("sweep %+v", r)
	}
	st, err := opdo.Do[core.UserStatus](ctx, eng, core.ReadStatus{User: "alice"})
	if err != nil || st.Status != core.StatusOnline || len(st.Devices) != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
	_, err = opdo.Do[core.Ack](ctx, eng, core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Token: "not-the-token"})
	if !errors.Is(err, core.ErrSessionReplaced) {
		t.Fatalf("stale token: %v", err)
	}
	_, err = opdo.Do[core.Ack](ctx, eng, core.Heartbeat{User: "", Device: "web"})
	var ie *core.InputError
	if !errors.As(err, &ie) || ie.Field != "Heartbeat.User" {
		t.Fatalf("empty user: %v", err)
	}
	sc := core.Scope{Class: "room", ID: "r1"}
	if err := opdo.Err(ctx, eng, core.ScopeTouch{Scope: sc, Member: "alice"}); err != nil {
		t.Fatal(err)
	}
	if c, err := opdo.Do[core.Count](ctx, eng, core.ReadCount{Scope: sc}); err != nil || c.N != 1 {
		t.Fatalf("count %+v %v", c, err)
	}
}

func TestMalformedRequestsAreErrors(t *testing.T) {
	ctx := context.Background()
	store, _ := miniStore(t, t0)
	in := instanceT(t, store)
	for _, req := range []string{
		``, `null`, `{`, `[]`, `{"v":2}`, `{"v":1,"op":"count"}`, `{"v":2,"op":"nope"}`,
		`{"v":2,"op":"count","args":{"scope":{"class":"room","id":"x"}}}`, // before configure
		`{"v":2,"op":"configure","args":{"bogus":1}}`,
		`{"v":2,"op":"configure","args":{"policy":"sometimes"}}`,
		`{"v":2,"op":"configure","args":{}} trailing`,
		"\xff\xfe",
	} {
		out, err := in.Call(ctx, []byte(req))
		if err != nil {
			t.Fatalf("%q: module failed: %v", req, err)
		}
		resp, err := abi.DecodeResponse(abi.OpCount, out)
		if err != nil || resp.Error == nil {
			t.Fatalf("%q: want an error response, got %s (%v)", req, out, err)
		}
	}
	// The instance is still usable.
	if _, err := in.Configure(ctx, core.Config{Clock: (&clock{t: t0}).Now}, host.EngineOptions{}); err != nil {
		t.Fatal(err)
	}
	// An op without now on the host clock is refused.
	out, _ := in.Call(ctx, []byte(`{"v":2,"op":"count","args":{"scope":{"class":"room","id":"x"}}}`))
	resp, _ := abi.DecodeResponse(abi.OpCount, out)
	if resp.Error == nil || resp.Error.Code != abi.CodeMalformed {
		t.Fatalf("missing now: %s", out)
	}
}

// TestBadResumesAreErrors: through the module, a resume of an unknown
// plan, with the wrong number of results or malformed, and a cancel, get
// typed error responses, and the instance stays usable.
func TestBadResumesAreErrors(t *testing.T) {
	ctx := context.Background()
	store, _ := miniStore(t, t0)
	in := instanceT(t, store)
	if _, err := in.Configure(ctx, core.Config{Clock: (&clock{t: t0}).Now}, host.EngineOptions{}); err != nil {
		t.Fatal(err)
	}
	now := t0.UnixMilli()
	call := func(req string) abi.Response {
		t.Helper()
		out, err := in.Call(ctx, []byte(req))
		if err != nil {
			t.Fatalf("%s: module failed: %v", req, err)
		}
		resp, err := abi.DecodeResponse(abi.OpStatus, out)
		if err != nil {
			t.Fatalf("%s: %s: %v", req, out, err)
		}
		return resp
	}
	first := call(fmt.Sprintf(`{"v":2,"op":"status","now":%d,"args":{"user":"alice"}}`, now))
	if first.Calls == nil {
		t.Fatalf("want calls: %+v", first)
	}
	for req, code := range map[string]string{
		fmt.Sprintf(`{"v":2,"op":"resume","now":%d,"args":{"plan":%d,"results":[]}}`, now, first.Plan+1):                       abi.CodeUnknownPlan,
		fmt.Sprintf(`{"v":2,"op":"resume","now":%d,"args":{"plan":%d,"results":[]}}`, now, first.Plan):                         abi.CodeResults,
		fmt.Sprintf(`{"v":2,"op":"resume","now":%d,"args":{"plan":%d,"results":[{"value":1},{"value":1}]}}`, now, first.Plan):  abi.CodeResults,
		fmt.Sprintf(`{"v":2,"op":"resume","now":%d,"args":{"plan":%d,"results":[{"value":true}]}}`, now, first.Plan):           abi.CodeMalformed,
		fmt.Sprintf(`{"v":2,"op":"resume","now":%d,"args":{"plan":%d,"results":[{"value":1}],"results":[]}}`, now, first.Plan): abi.CodeMalformed,
		`{"v":2,"op":"cancel","args":{"plan":12345}}`:                                                                          abi.CodeUnknownPlan,
	} {
		if resp := call(req); resp.Error == nil || resp.Error.Code != code {
			t.Errorf("%s: want code %s, got %+v", req, code, resp)
		}
	}
	// The plan is still in flight: a reply that does not decode as the
	// script expects ends it with the core's error, not a trap.
	resp := call(fmt.Sprintf(`{"v":2,"op":"resume","now":%d,"args":{"plan":%d,"results":[{"value":"garbage"}]}}`, now, first.Plan))
	if resp.Error == nil || !errors.Is(resp.Error.Err(), core.ErrReply) {
		t.Fatalf("garbage reply: %+v", resp.Error)
	}
	eng, err := in.Configure(ctx, core.Config{Clock: (&clock{t: t0}).Now}, host.EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opdo.Do[core.UserStatus](ctx, eng, core.ReadStatus{User: "alice"}); err != nil {
		t.Fatal(err)
	}
}

// countingStore counts the Evals (round trips) a store gets.
type countingStore struct {
	core.Store
	evals int
}

func (s *countingStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	s.evals++
	return s.Store.Eval(ctx, calls)
}

// TestRunPipelinesPlans: two hundred operations run together in one
// instance send their calls in shared round trips and end as they do
// natively one at a time.
func TestRunPipelinesPlans(t *testing.T) {
	ctx := context.Background()
	var ops []*host.Op
	var native []string
	nstore, _ := miniStore(t, t0)
	neng, err := core.New(nstore, core.Config{Clock: (&clock{t: t0}).Now, Rand: abi.SeededRand("run")})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		u := fmt.Sprint("u", i)
		switch i % 4 {
		case 0, 1:
			hb := core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb, Active: true}
			w := abi.FromHeartbeat(hb)
			ops = append(ops, &host.Op{Op: abi.OpHeartbeat, Args: &w})
			ack, err := neng.Heartbeat(ctx, hb)
			native = append(native, observe(abi.FromAck(ack), err))
		case 2:
			sc := core.Scope{Class: "room", ID: fmt.Sprint("r", i%3)}
			ops = append(ops, &host.Op{Op: abi.OpTouch, Args: &abi.Touch{Scope: abi.Scope{Class: sc.Class, ID: sc.ID}, Member: u}})
			native = append(native, observe(abi.Empty{}, neng.Touch(ctx, sc, u)))
		case 3:
			l := core.Login{User: u, Device: "ios", Kind: core.KindIOS, Gateway: "g1"}
			w := abi.FromLogin(l)
			ops = append(ops, &host.Op{Op: abi.OpLogin, Args: &w})
			r, err := neng.Login(ctx, l)
			native = append(native, observe(abi.FromLoginResult(r), err))
		}
	}
	store, _ := miniStore(t, t0)
	cs := &countingStore{Store: store}
	eng, err := instanceT(t, cs).Configure(ctx, core.Config{Clock: (&clock{t: t0}).Now}, host.EngineOptions{Seed: "run"})
	if err != nil {
		t.Fatal(err)
	}
	cs.evals = 0
	if err := eng.Run(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	for i, o := range ops {
		var res any
		switch r := o.Result.(type) {
		case *abi.Ack:
			res = *r
		case *abi.Empty:
			res = *r
		case *abi.LoginResult:
			res = *r
		}
		if o.Err != nil {
			res = nil
			switch o.Op {
			case abi.OpHeartbeat:
				res = abi.Ack{}
			case abi.OpLogin:
				res = abi.LoginResult{}
			}
		}
		if got := observe(res, o.Err); got != native[i] {
			t.Errorf("op %d %s: module %s, native %s", i, o.Op, got, native[i])
		}
	}
	if cs.evals > 6 {
		t.Errorf("%d round trips for %d plans in flight together", cs.evals, len(ops))
	}
	t.Logf("%d plans, %d round trips", len(ops), cs.evals)
}

// TestUnseededTokens: without a seed the module draws its tokens from the
// WASI random source (core's cryptoRand on wasip1): two instances that run
// the same operations issue different tokens, each 11 characters of
// base64url (8 random bytes).
func TestUnseededTokens(t *testing.T) {
	ctx := context.Background()
	var tokens []string
	for range 2 {
		store, _ := miniStore(t, t0)
		eng, err := instanceT(t, store).Configure(ctx, core.Config{}, host.EngineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := opdo.Do[core.LoginResult](ctx, eng, core.Login{User: "alice", Device: "web", Kind: core.KindWeb})
		if err != nil {
			t.Fatal(err)
		}
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		if len(res.Token) != 11 || strings.Trim(res.Token, alphabet) != "" {
			t.Fatalf("token %q: want 11 characters of base64url", res.Token)
		}
		tokens = append(tokens, res.Token)
	}
	if tokens[0] == tokens[1] {
		t.Fatalf("two unseeded instances issued the same token %q", tokens[0])
	}
}
