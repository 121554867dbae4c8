package host_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/host"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestEngineBasics(t *testing.T) {
	ctx := context.Background()
	store, mr := miniStore(t, t0)
	clk := &clock{t: t0}
	eng, err := instanceT(t, store).Configure(ctx, core.Config{Clock: clk}, host.EngineOptions{Seed: "basics"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Active: true})
	if err != nil {
		t.Fatal(err)
	}
	if ack.Token == "" || len(ack.Changes) != 0 {
		t.Fatalf("ack %+v", ack)
	}
	clk.set(t0.Add(2 * time.Second))
	mr.SetTime(clk.Now())
	r, err := eng.SweepUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Changes) != 1 || r.Changes[0].To != core.StatusOnline {
		t.Fatalf("sweep %+v", r)
	}
	st, err := eng.Status(ctx, "alice")
	if err != nil || st.Status != core.StatusOnline || len(st.Devices) != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
	_, err = eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Token: "not-the-token"})
	if !errors.Is(err, core.ErrSessionReplaced) {
		t.Fatalf("stale token: %v", err)
	}
	_, err = eng.Heartbeat(ctx, core.Heartbeat{User: "", Device: "web"})
	var ie *core.InputError
	if !errors.As(err, &ie) || ie.Field != "Heartbeat.User" {
		t.Fatalf("empty user: %v", err)
	}
	sc := core.Scope{Class: "room", ID: "r1"}
	if err := eng.Touch(ctx, sc, "alice"); err != nil {
		t.Fatal(err)
	}
	if c, err := eng.Count(ctx, sc); err != nil || c.N != 1 {
		t.Fatalf("count %+v %v", c, err)
	}
}

func TestMalformedRequestsAreErrors(t *testing.T) {
	ctx := context.Background()
	store, _ := miniStore(t, t0)
	in := instanceT(t, store)
	for _, req := range []string{
		``, `null`, `{`, `[]`, `{"v":1}`, `{"v":2,"op":"count"}`, `{"v":1,"op":"nope"}`,
		`{"v":1,"op":"count","args":{"scope":{"class":"room","id":"x"}}}`, // before configure
		`{"v":1,"op":"configure","args":{"bogus":1}}`,
		`{"v":1,"op":"configure","args":{"policy":"sometimes"}}`,
		`{"v":1,"op":"configure","args":{}} trailing`,
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
	if _, err := in.Configure(ctx, core.Config{Clock: &clock{t: t0}}, host.EngineOptions{}); err != nil {
		t.Fatal(err)
	}
	// An op without now on the host clock is refused.
	out, _ := in.Call(ctx, []byte(`{"v":1,"op":"count","args":{"scope":{"class":"room","id":"x"}}}`))
	resp, _ := abi.DecodeResponse(abi.OpCount, out)
	if resp.Error == nil || resp.Error.Code != abi.CodeMalformed {
		t.Fatalf("missing now: %s", out)
	}
}
