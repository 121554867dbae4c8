// Package floor holds the pieces of the module's hot path that the floor
// benchmark (wasm/host, BenchmarkFloor) times on their own, natively and
// inside a WebAssembly build (floor/module): decoding a compact
// heartbeat_batch request, and the core's plan of the batch alone, without
// a crossing or a codec. Their ratio is what Go compiled to WebAssembly
// costs on that work, which no encoding of the messages can remove.
package floor

import (
	"strconv"
	"strings"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
)

// Work is the state of a run: a planner, n beats with tokens, the compact
// request carrying them, and the reply of a steady script that applies
// them all.
type Work struct {
	planner *core.Planner
	beats   []core.Heartbeat
	request []byte
	results []core.Result
}

// New returns the work for n beats.
func New(n int) *Work {
	pl, err := core.NewPlanner(core.Config{UserBuckets: 1})
	if err != nil {
		panic(err)
	}
	w := &Work{planner: pl, beats: make([]core.Heartbeat, n)}
	batch := abi.HeartbeatBatch{Beats: make([]abi.Heartbeat, n)}
	tokens := make([]string, n)
	for i := range w.beats {
		w.beats[i] = core.Heartbeat{User: "user-" + strconv.Itoa(i), Device: "web", Kind: core.KindWeb, Token: "0123456789abcdef"}
		batch.Beats[i] = abi.FromHeartbeat(w.beats[i])
		tokens[i] = "0123456789abcdef"
	}
	if w.request, err = abi.EncodeRequestCompact(abi.Request{Op: abi.OpHeartbeatBatch, Now: 1767225600000, Args: &batch}); err != nil {
		panic(err)
	}
	w.results = []core.Result{{Value: core.StringValue(strings.Join(tokens, "\x1f"))}}
	return w
}

// Decode decodes the compact request.
func (w *Work) Decode() {
	if _, err := abi.DecodeRequest(w.request); err != nil {
		panic(err)
	}
}

// Plan runs the batch's plan: its calls, the steady reply, its acks.
func (w *Work) Plan() {
	p := w.planner.HeartbeatBatch("1767225600000", w.beats)
	if len(p.Calls()) != 1 {
		panic("floor: want one call")
	}
	if err := p.Step(w.results); err != nil {
		panic(err)
	}
	if acks, err := p.Outcome(); err != nil || len(acks) != len(w.beats) || acks[0].Token == "" {
		panic("floor: the steady script did not apply the beats")
	}
}
