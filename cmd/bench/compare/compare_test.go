package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/presencekit/presence/cmd/internal/benchkit"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		wantErr string // empty: no error
		check   func(t *testing.T, o options)
	}{
		{name: "defaults", args: nil, check: func(t *testing.T, o options) {
			if o.runs != 1 || o.designs != nil || !o.only[groupBeat] || !o.only[groupMemory] {
				t.Errorf("runs %d, designs %v, only %v", o.runs, o.designs, o.only)
			}
		}},
		{name: "narrowed", args: []string{"--designs", "engine/goredis, centrifuge", "--only", "beat", "--runs", "5"}, check: func(t *testing.T, o options) {
			if o.runs != 5 || len(o.designs) != 2 || !o.designs["engine/goredis"] || !o.designs["centrifuge"] {
				t.Errorf("runs %d, designs %v", o.runs, o.designs)
			}
			if !o.only[groupBeat] || o.only[groupBatch] || o.only[groupReads] || o.only[groupMemory] {
				t.Errorf("only %v, want beat alone", o.only)
			}
		}},
		{name: "skip memory", args: []string{"--skip-memory"}, check: func(t *testing.T, o options) {
			if o.only[groupMemory] || !o.only[groupBeat] {
				t.Errorf("only %v, want all but memory", o.only)
			}
		}},
		{name: "unknown design", args: []string{"--designs", "engine/nope"}, wantErr: "unknown design"},
		{name: "unknown group", args: []string{"--only", "beats"}, wantErr: "unknown workload group"},
		{name: "no rounds", args: []string{"--runs", "0"}, wantErr: "--runs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := parse(append([]string{"--redis", "redis://127.0.0.1:1"}, c.args...), io.Discard)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, o)
		})
	}
	if _, err := parse([]string{"--help"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

// TestRatios checks that the ratios pair each round's rows: the engine
// twice Centrifuge's rate in one round and half in another is 2 and 0.5
// there, whatever the medians of the rows.
func TestRatios(t *testing.T) {
	row := func(design string, rate, srv, cli float64) benchkit.ThroughputRow {
		return benchkit.ThroughputRow{Workload: "beat", Adapter: design, ItemsPerSec: rate, ServerCPUus: srv, ClientCPUus: cli}
	}
	c := &comparison{rep: &Report{Rounds: [][]benchkit.ThroughputRow{
		{row("engine/goredis", 200, 8, 4), row("engine/goredis", 50, 8, 4), row("engine/goredis", 100, 8, 4)},
		{row("centrifuge", 100, 10, 5), row("centrifuge", 100, 10, 5), row("centrifuge", 100, 10, 10)},
		{{Workload: "beat batch", Adapter: "engine/goredis", ItemsPerSec: 1}},
	}}}
	got := c.ratios()
	if len(got) != 1 || got[0].Design != "engine/goredis" {
		t.Fatalf("ratios %+v, want one for engine/goredis", got)
	}
	want := ratio{Design: "engine/goredis", Rate: [3]float64{1, 0.5, 2}, ServerCPU: [3]float64{0.8, 0.8, 0.8}, ClientCPU: [3]float64{0.8, 0.4, 0.8}}
	if got[0] != want {
		t.Errorf("ratios %+v, want %+v", got[0], want)
	}
	if s := spreadString(want.Rate); s != "1.00× (0.50–2.00)" {
		t.Errorf("spreadString = %q", s)
	}
	if s := spreadString(want.ServerCPU); s != "0.80×" {
		t.Errorf("spreadString of one value = %q", s)
	}
	none := &comparison{rep: &Report{Rounds: c.rep.Rounds[:1]}}
	if r := none.ratios(); r != nil {
		t.Errorf("ratios without Centrifuge = %+v, want none", r)
	}
}

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{
		"engine/goredis+batcher-beat-c16-r1.pprof": "engine_goredispbatcher-beat-c16-r1.pprof",
		"plain hset×16-beat batch-c4-r2.pprof":     "plain_hset_16-beat_batch-c4-r2.pprof",
	} {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
	}
}
