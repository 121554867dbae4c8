package core_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/limits"
	"github.com/presencekit/presence/internal/slot"
)

var update = flag.Bool("update", false, "rewrite golden files")

// nastyIDs hold what breaks naive key builders.
var nastyIDs = []string{"a", "a:b", "a:", ":a", "{a}", "}", "{", "a}b{c", "*", "a b", "é", "{u0}", "d:", strings.Repeat("z", limits.IDBytes)}

// second is another device ID derived from id, within the length cap.
func second(id string) string {
	if len(id) == limits.IDBytes {
		return id[:len(id)-1] + "2"
	}
	return id + "2"
}

// TestEveryCallStaysInOneSlot runs every operation with nasty IDs and
// checks that each call's keys share one slot, and that state never leaks
// between different IDs (the mapping is injective).
func TestEveryCallStaysInOneSlot(t *testing.T) {
	ctx := context.Background()
	e, rec, clk, mr := newRecordedEngine(t, scopeConfig(8))
	for i, u := range nastyIDs {
		dev := nastyIDs[(i+3)%len(nastyIDs)]
		if _, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: dev, Gateway: u, Meta: map[string]string{"id": u}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Login(ctx, core.Login{User: u, Device: second(dev)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.SetManual(ctx, u, core.ManualDND, time.Minute); err != nil {
			t.Fatal(err)
		}
		for _, sc := range []core.Scope{{Class: "room", ID: u}, {Class: "video", ID: u}, {Class: "live", ID: u}} {
			if err := e.Touch(ctx, sc, dev); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Count(ctx, sc); err != nil {
				t.Fatal(err)
			}
		}
	}
	clk.advance(mr, 2*time.Second)
	if _, err := e.SweepUsers(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SweepScopes(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range rec.calls {
		if len(c.Keys) == 0 {
			t.Fatalf("%s call has no keys: a cluster cannot route it", scriptOf(c))
		}
		if err := slot.Check(c.Keys); err != nil {
			t.Fatalf("%s: %v", scriptOf(c), err)
		}
	}
	statuses, err := e.Statuses(ctx, nastyIDs)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range statuses {
		dev := nastyIDs[(i+3)%len(nastyIDs)]
		meta := map[string]string{}
		for _, d := range st.Devices {
			meta[d.ID] = d.Meta["id"]
		}
		if len(st.Devices) != 2 || meta[dev] != nastyIDs[i] || meta[second(dev)] != "" {
			t.Errorf("user %q: devices %+v, want %q with its own metadata and %q", nastyIDs[i], st.Devices, dev, second(dev))
		}
	}
	for i, u := range nastyIDs {
		for _, class := range []string{"room", "video"} {
			page, err := e.Members(ctx, core.Scope{Class: class, ID: u}, "", 10)
			if err != nil || len(page.Members) != 1 || page.Members[0].ID != nastyIDs[(i+3)%len(nastyIDs)] {
				t.Errorf("%s %q: members %+v, %v", class, u, page.Members, err)
			}
		}
	}
}

// seededRand makes tokens deterministic for the golden file.
type seededRand struct{ r *rand.ChaCha8 }

func (s seededRand) Read(p []byte) (int, error) { return s.r.Read(p) }

// TestCommandStreamGolden records the script calls of a short session and
// compares them with testdata/commands.golden (go test -run Golden -update
// rewrites it). A change in key layout or script arguments shows here.
func TestCommandStreamGolden(t *testing.T) {
	ctx := context.Background()
	e, rec, clk, mr := newRecordedEngine(t, core.Config{UserBuckets: 4, ScopeBuckets: 4, Rand: seededRand{rand.NewChaCha8([32]byte{})}})
	steps := []func() error{
		func() error {
			_, err := e.Login(ctx, core.Login{User: "alice", Device: "web", Kind: core.KindWeb, Gateway: "gw1"})
			return err
		},
		func() error {
			_, err := e.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "phone", Kind: core.KindIOS, Active: true})
			return err
		},
		func() error { _, err := e.SetManual(ctx, "alice", core.ManualDND, 0); return err },
		func() error { _, err := e.Status(ctx, "alice"); return err },
		func() error { return e.Touch(ctx, core.Scope{Class: "video", ID: "10086"}, "alice") },
		func() error { _, err := e.Count(ctx, core.Scope{Class: "video", ID: "10086"}); return err },
		func() error { _, err := e.Disconnect(ctx, "alice", "phone", ""); return err },
		func() error { clk.advance(mr, 2*time.Second); _, err := e.SweepUsers(ctx); return err },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	var b strings.Builder
	for _, c := range rec.calls {
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = fmt.Sprintf("%q", a)
		}
		how := "EVALSHA"
		if c.Source != "" {
			how = "EVAL"
		}
		fmt.Fprintf(&b, "%s %s keys=%q\n    args=%s\n", how, scriptOf(c), c.Keys, strings.Join(args, " "))
	}
	const path = "testdata/commands.golden"
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("command stream differs from %s (run with -update if intended):\n%s", path, b.String())
	}
}

// TestSpreadShardsUseManySlots checks that a spread compact scope's shards
// land on different cluster slots, while a together scope's share one.
func TestSpreadShardsUseManySlots(t *testing.T) {
	ctx := context.Background()
	for _, spread := range []bool{false, true} {
		e, rec, _, _ := newRecordedEngine(t, scopeConfigSpread(32, spread))
		for i := 0; i < 200; i++ {
			if err := e.Touch(ctx, video, fmt.Sprint("viewer-", i)); err != nil {
				t.Fatal(err)
			}
		}
		slots := map[uint16]bool{}
		for _, c := range rec.calls {
			for _, k := range append(c.Keys, c.Args...) {
				if strings.Contains(k, ":h:video:") || strings.Contains(k, ":c:video:") {
					slots[slot.Of(k)] = true
				}
			}
		}
		if spread && len(slots) < 16 {
			t.Errorf("spread: shards on %d slots, want most of 32", len(slots))
		}
		if !spread && len(slots) != 1 {
			t.Errorf("together: shards on %d slots, want 1", len(slots))
		}
	}
}
