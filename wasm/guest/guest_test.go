package guest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/guest"
)

// host drives a guest natively, as wasm/host drives a module: it runs the
// calls of each plan on a store and resumes the plan with the results.
type host struct {
	t         *testing.T
	g         *guest.Guest
	store     core.Store
	published []string
	compact   bool     // send requests in the compact form where they have one
	raw       [][]byte // the responses
	sent      []bool   // whether each request was compact
}

func newHost(t *testing.T) *host {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	return &host{t: t, g: guest.New(), store: goredis.New(c)}
}

// send hands the guest one request and decodes the response as op's.
func (h *host) send(op string, now int64, reqOp string, args any) abi.Response {
	h.t.Helper()
	encode := abi.EncodeRequest
	if h.compact {
		encode = abi.EncodeRequestCompact
	}
	req, err := encode(abi.Request{Op: reqOp, Now: now, Args: args})
	if err != nil {
		h.t.Fatal(err)
	}
	out := h.g.Handle(req)
	h.raw, h.sent = append(h.raw, bytes.Clone(out)), append(h.sent, req[0] == abi.Compact)
	resp, err := abi.DecodeResponse(op, out)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// do runs op to its end, one plan at a time.
func (h *host) do(op string, now int64, args any) abi.Response {
	h.t.Helper()
	resp := h.send(op, now, op, args)
	for resp.Calls != nil {
		res := h.store.Eval(context.Background(), resp.Calls)
		resp = h.send(op, now, abi.OpResume, &abi.Resume{Plan: resp.Plan, Results: res})
	}
	for _, m := range resp.Messages {
		h.published = append(h.published, m.Channel+" "+m.Payload)
	}
	return resp
}

func configure(t *testing.T, h *host, publish bool) {
	t.Helper()
	seed := "s"
	cfg := abi.Config{Seed: &seed, Publish: publish, CoalesceWindow: abi.Duration(-1)}
	if resp := h.do(abi.OpConfigure, 0, &cfg); resp.Error != nil {
		t.Fatal(resp.Error.Err())
	}
}

var now = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).UnixMilli()

func TestGuestLifecycle(t *testing.T) {
	h := newHost(t)
	hb := abi.FromHeartbeat(core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Active: true})
	if resp := h.do(abi.OpHeartbeat, now, &hb); resp.Error == nil || resp.Error.Code != abi.CodeUnconfigured {
		t.Fatalf("before configure: %+v", resp)
	}
	configure(t, h, true)
	resp := h.do(abi.OpHeartbeat, now, &hb)
	if resp.Error != nil {
		t.Fatal(resp.Error.Err())
	}
	ack := resp.Result.(*abi.Ack).Core()
	if ack.Token == "" || len(ack.Changes) != 1 || ack.Changes[0].To != core.StatusOnline {
		t.Fatalf("ack %+v", ack)
	}
	if len(h.published) != 1 || !strings.Contains(h.published[0], `"to":"ONLINE"`) {
		t.Fatalf("published %q", h.published)
	}
	// A refused heartbeat is a result carrying the error.
	stale := abi.FromHeartbeat(core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Token: "feedfacefeedface"})
	resp = h.do(abi.OpHeartbeat, now+1000, &stale)
	if resp.Error != nil || !errors.Is(resp.Result.(*abi.Ack).Core().Err, core.ErrSessionReplaced) {
		t.Fatalf("stale token: %+v", resp)
	}
	// Invalid input is the core's *InputError, field and all, at once.
	resp = h.send(abi.OpStatus, now, abi.OpStatus, &abi.StatusArgs{User: ""})
	var ie *core.InputError
	if resp.Error == nil || !errors.As(resp.Error.Err(), &ie) || ie.Field != "user" {
		t.Fatalf("empty user: %+v", resp.Error)
	}
	// Without now, on the host clock: malformed.
	if resp := h.do(abi.OpStatus, 0, &abi.StatusArgs{User: "alice"}); resp.Error == nil || resp.Error.Code != abi.CodeMalformed {
		t.Fatalf("no now: %+v", resp)
	}
	resp = h.do(abi.OpStatus, now+2000, &abi.StatusArgs{User: "alice"})
	if resp.Error != nil || resp.Result.(*abi.UserStatus).Status != abi.Status(core.StatusOnline) {
		t.Fatalf("status: %+v", resp)
	}
}

// TestGuestRefusesBadResumes: an unknown, finished or cancelled plan, a
// wrong number of results and a malformed resume are typed error
// responses; the plan in flight survives the last two.
func TestGuestRefusesBadResumes(t *testing.T) {
	h := newHost(t)
	configure(t, h, false)
	args := &abi.StatusArgs{User: "alice"}
	first := h.send(abi.OpStatus, now, abi.OpStatus, args)
	if first.Calls == nil || first.Plan <= 0 {
		t.Fatalf("want calls: %+v", first)
	}
	code := func(resp abi.Response) string {
		if resp.Error == nil {
			return ""
		}
		return resp.Error.Code
	}
	if c := code(h.send(abi.OpStatus, now, abi.OpResume, &abi.Resume{Plan: first.Plan + 100, Results: []core.Result{{}}})); c != abi.CodeUnknownPlan {
		t.Fatalf("unknown plan: %q", c)
	}
	if c := code(h.send(abi.OpStatus, now, abi.OpResume, &abi.Resume{Plan: first.Plan, Results: make([]core.Result, len(first.Calls)+1)})); c != abi.CodeResults {
		t.Fatalf("too many results: %q", c)
	}
	if c := code(h.send(abi.OpStatus, now, abi.OpResume, &abi.Resume{Plan: first.Plan})); c != abi.CodeResults {
		t.Fatalf("no results: %q", c)
	}
	bad := fmt.Sprintf(`{"v":2,"op":"resume","now":%d,"args":{"plan":%d,"results":[{"value":1.5}]}}`, now, first.Plan)
	if resp, err := abi.DecodeResponse(abi.OpStatus, h.g.Handle([]byte(bad))); err != nil || code(resp) != abi.CodeMalformed {
		t.Fatalf("malformed: %+v %v", resp, err)
	}
	if ids := h.g.InFlight(); !reflect.DeepEqual(ids, []int64{first.Plan}) {
		t.Fatalf("in flight: %v", ids)
	}
	// The plan still ends well.
	resp := h.send(abi.OpStatus, now, abi.OpResume, &abi.Resume{Plan: first.Plan, Results: h.store.Eval(context.Background(), first.Calls)})
	for resp.Calls != nil {
		resp = h.send(abi.OpStatus, now, abi.OpResume, &abi.Resume{Plan: resp.Plan, Results: h.store.Eval(context.Background(), resp.Calls)})
	}
	if resp.Error != nil || resp.Result.(*abi.UserStatus).User != "alice" {
		t.Fatalf("status: %+v", resp)
	}
	// Finished: unknown.
	if c := code(h.send(abi.OpStatus, now, abi.OpResume, &abi.Resume{Plan: first.Plan, Results: []core.Result{{}}})); c != abi.CodeUnknownPlan {
		t.Fatalf("finished plan: %q", c)
	}
	// Cancelled: unknown; a second cancel too.
	p := h.send(abi.OpStatus, now, abi.OpStatus, args)
	if resp := h.send(abi.OpCancel, now, abi.OpCancel, &abi.PlanRef{Plan: p.Plan}); resp.Error != nil {
		t.Fatalf("cancel: %+v", resp.Error)
	}
	if c := code(h.send(abi.OpCancel, now, abi.OpCancel, &abi.PlanRef{Plan: p.Plan})); c != abi.CodeUnknownPlan {
		t.Fatalf("second cancel: %q", c)
	}
	if c := code(h.send(abi.OpStatus, now, abi.OpResume, &abi.Resume{Plan: p.Plan, Results: make([]core.Result, len(p.Calls))})); c != abi.CodeUnknownPlan {
		t.Fatalf("cancelled plan: %q", c)
	}
}

// TestGuestBoundsPlansInFlight: past abi.MaxPlans, starting a plan
// abandons the oldest.
func TestGuestBoundsPlansInFlight(t *testing.T) {
	h := newHost(t)
	configure(t, h, false)
	var ids []int64
	for i := 0; i < abi.MaxPlans+3; i++ {
		resp := h.send(abi.OpStatus, now, abi.OpStatus, &abi.StatusArgs{User: fmt.Sprint("u", i)})
		if resp.Calls == nil {
			t.Fatalf("want calls: %+v", resp)
		}
		ids = append(ids, resp.Plan)
	}
	in := h.g.InFlight()
	if len(in) != abi.MaxPlans || in[0] != ids[3] || in[len(in)-1] != ids[len(ids)-1] {
		t.Fatalf("in flight: %d, from %d to %d", len(in), in[0], in[len(in)-1])
	}
	resp := h.send(abi.OpStatus, now, abi.OpResume, &abi.Resume{Plan: ids[0], Results: []core.Result{{}}})
	if resp.Error == nil || resp.Error.Code != abi.CodeUnknownPlan {
		t.Fatalf("abandoned plan: %+v", resp)
	}
}

// TestGuestPlansInFlight: plans started together, their calls answered in
// one store round per step, end as they do one at a time.
func TestGuestPlansInFlight(t *testing.T) {
	type op struct {
		op   string
		args any
	}
	var ops []op
	for i := 0; i < 40; i++ {
		u := fmt.Sprint("u", i%7)
		switch i % 5 {
		case 0, 1:
			hb := abi.FromHeartbeat(core.Heartbeat{User: u, Device: fmt.Sprint("d", i), Kind: core.KindWeb, Active: true})
			ops = append(ops, op{abi.OpHeartbeat, &hb})
		case 2:
			ops = append(ops, op{abi.OpTouch, &abi.Touch{Scope: abi.Scope{Class: "room", ID: "r"}, Member: u}})
		case 3:
			ops = append(ops, op{abi.OpCount, &abi.ScopeArgs{Scope: abi.Scope{Class: "room", ID: "r"}}})
		case 4:
			ops = append(ops, op{abi.OpStatuses, &abi.StatusesArgs{Users: []string{u, "nobody"}}})
		}
	}
	render := func(resp abi.Response) string {
		if resp.Error != nil {
			return "error " + resp.Error.Code + " " + resp.Error.Message
		}
		b, _ := abi.Marshal(resp.Result)
		return string(b)
	}
	// One at a time; every op reads state the ones before it left, so the
	// concurrent run below uses ops that do not depend on each other: the
	// heartbeats of distinct devices, touches, and reads taken before.
	seq := newHost(t)
	configure(t, seq, false)
	var want []string
	for _, o := range ops {
		if o.op == abi.OpHeartbeat || o.op == abi.OpTouch {
			want = append(want, render(seq.do(o.op, now, o.args)))
		}
	}
	con := newHost(t)
	configure(t, con, false)
	type flight struct {
		op    string
		resp  abi.Response
		index int
	}
	var live []flight
	got := make([]string, 0, len(want))
	for _, o := range ops {
		if o.op == abi.OpHeartbeat || o.op == abi.OpTouch {
			live = append(live, flight{op: o.op, resp: con.send(o.op, now, o.op, o.args), index: len(got)})
			got = append(got, "")
		}
	}
	rounds := 0
	for {
		var calls []core.Call
		var waiting []flight
		for _, f := range live {
			if f.resp.Calls == nil {
				got[f.index] = render(f.resp)
				continue
			}
			calls = append(calls, f.resp.Calls...)
			waiting = append(waiting, f)
		}
		if len(waiting) == 0 {
			break
		}
		rounds++
		res := con.store.Eval(context.Background(), calls)
		for i := range waiting {
			f := &waiting[i]
			n := len(f.resp.Calls)
			f.resp = con.send(f.op, now, abi.OpResume, &abi.Resume{Plan: f.resp.Plan, Results: res[:n]})
			res = res[n:]
		}
		live = waiting
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("in flight together:\n%q\none at a time:\n%q", got, want)
	}
	if rounds > 4 {
		t.Fatalf("%d rounds for %d plans", rounds, len(want))
	}
}

func TestGuestRefusesGarbage(t *testing.T) {
	g := guest.New()
	for _, in := range []string{"", "{", `{"v":2,"op":"nope"}`, `{"v":9}`, `{"v":1,"op":"status"}`, "\x00\x01",
		`{"v":2,"op":"resume","now":1,"args":{"plan":1,"results":[]}}`} {
		resp, err := abi.DecodeResponse(abi.OpStatus, g.Handle([]byte(in)))
		if err != nil || resp.Error == nil {
			t.Errorf("%q: %+v %v", in, resp, err)
		}
	}
}

// TestGuestCompact: the same operations give the same results in JSON and
// in the compact form; compact requests get compact responses where these
// have that form (calls, acks), JSON otherwise (errors, other results).
func TestGuestCompact(t *testing.T) {
	run := func(compact bool) (results []any, raw [][]byte, sent []bool) {
		h := newHost(t)
		h.compact = compact
		configure(t, h, true)
		hb := abi.FromHeartbeat(core.Heartbeat{User: "alice", Device: "web\xff", Kind: core.KindWeb, Active: true,
			Meta: map[string]string{"b": "2", "a": "\x00"}})
		bad := abi.FromHeartbeat(core.Heartbeat{User: "", Device: "web", Kind: core.KindWeb})
		for _, op := range []struct {
			op   string
			args any
		}{
			{abi.OpHeartbeat, &hb},
			{abi.OpHeartbeatBatch, &abi.HeartbeatBatch{Beats: []abi.Heartbeat{hb, bad, {User: "bob", Device: "d", Kind: 1}}}},
			{abi.OpHeartbeat, &bad},
			{abi.OpLogin, &abi.Login{User: "carol", Device: "d", Kind: 2}},
			{abi.OpStatus, &abi.StatusArgs{User: "alice"}},
		} {
			resp := h.do(op.op, now, op.args)
			results = append(results, resp.Result, resp.Error)
		}
		resp := h.send(abi.OpHeartbeat, now, abi.OpResume, &abi.Resume{Plan: 999, Results: abi.Results{}})
		results = append(results, resp.Error, h.published)
		return results, h.raw[1:], h.sent[1:]
	}
	js, jsRaw, _ := run(false)
	compact, compactRaw, sent := run(true)
	if !reflect.DeepEqual(js, compact) {
		t.Fatalf("JSON and compact differ:\n%+v\n%+v", js, compact)
	}
	if len(jsRaw) != len(compactRaw) {
		t.Fatalf("%d responses in JSON, %d compact", len(jsRaw), len(compactRaw))
	}
	n := 0
	for i := range compactRaw {
		if compactRaw[i][0] == abi.Compact {
			n++
		}
	}
	if n < 5 {
		t.Errorf("%d compact responses, want 5 or more", n)
	}
	for i := range jsRaw {
		j := string(jsRaw[i])
		wantCompact := sent[i] && (strings.HasPrefix(j, `{"v":2,"plan":`) ||
			strings.HasPrefix(j, `{"v":2,"result":{"token":`) && !strings.Contains(j, `"kicked"`) ||
			strings.HasPrefix(j, `{"v":2,"result":{"acks":`))
		if got := compactRaw[i][0] == abi.Compact; got != wantCompact {
			t.Errorf("response %d: compact %v, want %v: %q for %q", i, got, wantCompact, compactRaw[i], jsRaw[i])
		}
	}
}
