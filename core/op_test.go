package core_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
)

// TestDoorsAgree runs one sequence of operation values through the
// engine's door (Engine.Do) and the model's (Model.Do) on the same clock
// and token source, and compares every outcome; the model refuses with
// ErrUnsupported what only Redis keeps.
func TestDoorsAgree(t *testing.T) {
	ctx := context.Background()
	room := core.Scope{Class: "room", ID: "r1"}
	cfg := func() core.Config {
		return core.Config{CoalesceWindow: -1, Rand: rand.NewChaCha8([32]byte{7}),
			Classes: map[string]core.ScopeClass{"room": {Layout: core.LayoutExact}}}
	}
	e, clk, mr := newMiniEngine(t, cfg())
	mcfg := cfg()
	mcfg.Clock = clk.Now
	m, err := core.NewModel(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		op   core.Op
		wait time.Duration // the clock moves on after the step
	}{
		{"login", core.Login{User: "ann", Device: "web", Kind: core.KindWeb}, time.Second},
		{"heartbeat", core.Heartbeat{User: "bob", Device: "phone", Kind: core.KindIOS, Active: true}, time.Second},
		{"batch", core.HeartbeatBatch{{User: "bob", Device: "phone", Kind: core.KindIOS}, {User: "cy", Device: "web", Kind: core.KindWeb}}, time.Second},
		{"manual", core.SetManual{User: "bob", Manual: core.ManualDND, TTL: time.Minute}, time.Second},
		{"status", core.ReadStatus{User: "bob"}, 0},
		{"statuses", core.ReadStatuses{Users: []string{"ann", "bob", "nobody"}}, 0},
		{"online", core.ReadOnline{}, 0},
		{"touch", core.ScopeTouch{Scope: room, Member: "ann"}, time.Second},
		{"touches", core.TouchBatch{{Scope: room, Member: "bob"}, {Scope: room, Member: "cy"}}, time.Second},
		{"count", core.ReadCount{Scope: room}, 0},
		{"members", core.ReadMembers{Scope: room, Limit: 10}, 0},
		{"active", core.ReadActive{Scope: room, Within: time.Minute}, 0},
		{"leave", core.Leave{Scope: room, Member: "cy"}, time.Second},
		{"logout", core.Logout{User: "cy", Device: "web"}, time.Second},
		{"disconnect", core.Disconnect{User: "bob", Device: "phone"}, time.Hour},
		{"sweep users", core.SweepUsers{}, 0},
		{"sweep scopes", core.SweepScopes{}, 0},
		{"invalid", core.ReadStatus{User: ""}, 0},
	}
	for _, s := range steps {
		got, gotErr := e.Do(ctx, s.op)
		want, wantErr := m.Do(ctx, s.op)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && errName(gotErr) != errName(wantErr) {
			t.Fatalf("%s: engine's error %v, model's %v", s.name, gotErr, wantErr)
		}
		if r, ok := got.(core.SweepReport); ok { // what a pass visited is the engine's own
			w := want.(core.SweepReport)
			got, want = r.Changes, w.Changes
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: engine %#v, model %#v", s.name, got, want)
		}
		clk.t = clk.t.Add(s.wait)
		mr.SetTime(clk.t)
	}
	for _, op := range []core.Op{core.ReadChangeLog{Limit: 1}, core.AppendLog{}, core.AckEvents{}} {
		if _, err := m.Do(ctx, op); !errors.Is(err, core.ErrUnsupported) {
			t.Errorf("model.Do(%T) = %v, want ErrUnsupported", op, err)
		}
	}
}
