// Package floor holds the pieces of the module's hot path that the floor
// benchmark (wasm/host, BenchmarkFloor) times on their own, natively and
// inside a WebAssembly build (floor/module): decoding a compact
// heartbeat_batch request, the core's plan of the batch alone, without a
// crossing or a codec, and the guest's handling of the same batch in the
// compact form (start and resume, codec included, crossing excluded). Their ratio is what Go compiled to WebAssembly
// costs on that work, which no encoding of the messages can remove.
package floor

import (
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/guest"
)

// The steady beat's arguments before its beats and for each beat
// (core/lua/heartbeat_steady.lua).
const steadyHead, steadyFields = 6, 6

// Work is the state of a run: a planner, n beats with tokens, the compact
// request carrying them, and the reply of a steady script that applies
// them all.
type Work struct {
	guest   *guest.Guest
	op      string
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
	w := &Work{planner: pl, beats: make([]core.Heartbeat, n), guest: guest.New(), op: abi.OpHeartbeatBatch}
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
	// the steady script's reply to each call of the batch: a token for each
	// of its beats (core/lua/heartbeat_steady.lua)
	probe := pl.Plan(core.HeartbeatBatch(w.beats), time.UnixMilli(1767225600000))
	for _, c := range probe.Calls() {
		beats := (len(c.Args) - steadyHead) / steadyFields
		w.results = append(w.results, core.Result{Value: core.Value{Kind: core.ValueString, Str: strings.Join(tokens[:beats], "\x1f")}})
	}
	cfg := abi.FromConfig(core.Config{UserBuckets: 1})
	cfg.Clock = abi.ClockHost
	req, err := abi.EncodeRequest(abi.Request{Op: abi.OpConfigure, Args: &cfg})
	if err != nil {
		panic(err)
	}
	if resp, err := abi.DecodeResponse(abi.OpConfigure, w.guest.Handle(req)); err != nil || resp.Error != nil {
		panic("floor: configure failed")
	}
	return w
}

// Guest hands the guest the request, and then the resume with the steady
// reply; it reads the plan's ID from the first response, and checks that
// the second is the batch's acks.
func (w *Work) Guest() {
	resp, err := abi.DecodeResponse(w.op, w.guest.Handle(w.request))
	if err != nil || resp.Plan == 0 {
		panic("floor: no plan")
	}
	req, err := abi.EncodeRequestCompact(abi.Request{Op: abi.OpResume, Now: 1767225600001,
		Args: &abi.Resume{Plan: resp.Plan, Results: w.results}})
	if err != nil {
		panic(err)
	}
	if out := w.guest.Handle(req); len(out) == 0 || out[0] != abi.Compact {
		panic("floor: no acks")
	}
}

// Decode decodes the compact request.
func (w *Work) Decode() {
	if _, err := abi.DecodeRequest(w.request); err != nil {
		panic(err)
	}
}

// Plan runs the plan the module runs for the beats, as the guest drives
// it: one heartbeat's (beats=1) or the batch's, its calls, the steady
// reply, its acks, and the plan handed back for reuse.
func (w *Work) Plan() {
	now := time.UnixMilli(1767225600000)
	var p core.Stepper
	if len(w.beats) == 1 {
		p = w.planner.Plan(&w.beats[0], now)
	} else {
		p = w.planner.Plan((*core.HeartbeatBatch)(&w.beats), now)
	}
	if len(p.Calls()) != len(w.results) {
		panic("floor: the calls are not those of the setup")
	}
	if err := p.Step(w.results); err != nil {
		panic(err)
	}
	if len(w.beats) == 1 {
		if ack, err := p.(interface{ Outcome() (core.Ack, error) }).Outcome(); err != nil || ack.Token == "" {
			panic("floor: the steady script did not apply the beat")
		}
	} else if acks, err := p.(interface{ Outcome() ([]core.Ack, error) }).Outcome(); err != nil || len(acks) != len(w.beats) || acks[0].Token == "" {
		panic("floor: the steady script did not apply the beats")
	}
	w.planner.Release(p)
}
