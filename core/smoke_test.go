package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	e, clk, _ := newMiniEngine(t, core.Config{})
	ack, err := e.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "web1", Kind: core.KindWeb, Active: true})
	t.Logf("ack %+v err %v", ack, err)
	st, err := e.Status(ctx, "alice")
	t.Logf("st %+v err %v", st, err)
	clk.t = clk.t.Add(2 * time.Second)
	r, err := e.SweepUsers(ctx)
	t.Logf("sweep %+v err %v", r, err)
	lr, err := e.Login(ctx, core.Login{User: "alice", Device: "ios", Kind: core.KindIOS, Policy: ptr(core.PolicyExclusive)})
	t.Logf("login %+v err %v", lr, err)
	_, err = e.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "web1", Kind: core.KindWeb, Token: ack.Token})
	t.Logf("stale hb err %v", err)
	for _, sc := range []core.Scope{{Class: "room", ID: "r1"}, {Class: "video", ID: "v1"}} {
		for _, m := range []string{"a", "b", "c"} {
			if err := e.Touch(ctx, sc, m); err != nil {
				t.Fatal(err)
			}
		}
		c, err := e.Count(ctx, sc)
		t.Logf("count %v %+v %v", sc, c, err)
		p, err := e.Members(ctx, sc, "", 2)
		t.Logf("members %+v %v", p, err)
		p, err = e.Members(ctx, sc, p.Next, 2)
		t.Logf("members %+v %v", p, err)
	}
	clk.t = clk.t.Add(20 * time.Minute)
	r, err = e.SweepScopes(ctx)
	t.Logf("sweep scopes %+v err %v", r, err)
	r, err = e.SweepUsers(ctx)
	t.Logf("sweep users %+v err %v", r, err)
}

func ptr[T any](v T) *T { return &v }
