package lanes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/guest"
)

// Sequence is the scripted run every lane performs.
type Sequence struct {
	Steps []Step `json:"steps"`
}

// Step is a group of ABI requests started together, whose plans share
// pipelines.
type Step struct {
	Name     string            `json:"name"`
	Requests []json.RawMessage `json:"requests"`
}

// Line names the step of each output line, in order.
func (s Sequence) Line(i int) string {
	for _, st := range s.Steps {
		if i < len(st.Requests) {
			return fmt.Sprintf("%s (request %d: %s)", st.Name, i+1, st.Requests[i])
		}
		i -= len(st.Requests)
	}
	return fmt.Sprintf("line %d past the sequence's end", i)
}

// Len is the number of requests, and so of output lines.
func (s Sequence) Len() int {
	n := 0
	for _, st := range s.Steps {
		n += len(st.Requests)
	}
	return n
}

// Path is the sequence file's path.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "sequence.json")
}

// Load reads the sequence file.
func Load() (Sequence, error) {
	var s Sequence
	b, err := os.ReadFile(Path())
	if err != nil {
		return s, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("lanes: %s: %w", Path(), err)
	}
	return s, nil
}

// Native runs the sequence through the guest compiled for this machine,
// its calls on store, and returns the final response to each request.
func Native(ctx context.Context, seq Sequence, store core.Store) ([]string, error) {
	g := guest.New()
	var out []string
	for _, st := range seq.Steps {
		lines, err := runStep(ctx, g, st, store)
		if err != nil {
			return nil, fmt.Errorf("lanes: step %q: %w", st.Name, err)
		}
		out = append(out, lines...)
	}
	return out, nil
}

type inFlight struct {
	i     int
	now   int64
	plan  int64
	calls []core.Call
}

func runStep(ctx context.Context, g *guest.Guest, st Step, store core.Store) ([]string, error) {
	out := make([]string, len(st.Requests))
	var live []inFlight
	// settle records a response: the plan's end, or its next calls.
	settle := func(i int, op string, now int64, resp []byte) error {
		r, err := abi.DecodeResponse(op, resp)
		if err != nil {
			return fmt.Errorf("response %s: %w", resp, err)
		}
		if r.Calls != nil {
			live = append(live, inFlight{i: i, now: now, plan: r.Plan, calls: r.Calls})
			return nil
		}
		out[i] = string(resp)
		return nil
	}
	ops := make([]string, len(st.Requests))
	for i, raw := range st.Requests {
		// Read leniently: a request the module must refuse belongs in the
		// sequence too.
		var req struct {
			Op  string `json:"op"`
			Now int64  `json:"now"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("request %s: %w", raw, err)
		}
		ops[i] = req.Op
		if err := settle(i, req.Op, req.Now, g.Handle(raw)); err != nil {
			return nil, err
		}
	}
	for len(live) > 0 {
		var calls []core.Call
		for _, f := range live {
			calls = append(calls, f.calls...)
		}
		res := store.Eval(ctx, calls)
		if len(res) != len(calls) {
			return nil, fmt.Errorf("store returned %d results for %d calls", len(res), len(calls))
		}
		waiting := live
		live = nil
		for _, f := range waiting {
			mine := res[:len(f.calls)]
			res = res[len(f.calls):]
			req, err := abi.EncodeRequest(abi.Request{Op: abi.OpResume, Now: f.now,
				Args: &abi.Resume{Plan: f.plan, Results: mine}})
			if err != nil {
				return nil, err
			}
			if err := settle(f.i, ops[f.i], f.now, g.Handle(req)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
