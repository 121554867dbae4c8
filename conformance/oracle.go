package conformance

import (
	"errors"
	"io"
	"time"

	"github.com/presencekit/presence/core"
)

// oracle is the reference side of a sequence: core.Model, fed the same
// token bytes as the engine.
//
// While the known Model bug bugModelRefusalPrunes is unfixed (a refused
// request, or one that finds nothing to do, prunes the user's expired
// records and so forgets when the user went offline), the oracle keeps the
// design's rule that such a request changes nothing literally: after one,
// it rebuilds the model by replaying every step that was accepted, with the
// refused one left out (its token bytes still consumed). Everything the
// refused step itself observed is still compared.
type oracle struct {
	cfg   core.Config // without Clock and Rand
	tape  []byte      // the token bytes, shared with the engine's source
	clk   *clock
	rd    *tapeReader
	m     *core.Model
	patch bool
	hist  []histEntry
}

// histEntry is a step the model accepted, as it ran, or (op nil) the
// token bytes of a refused step.
type histEntry struct {
	op   op
	now  time.Time
	book *book
	burn int
}

// tapeLen bounds the token bytes of one sequence: 8 bytes a token, a few
// tokens a step.
const tapeLen = 16 << 10

func newOracle(cfg core.Config, seed uint64, patch bool) (*oracle, error) {
	tape := make([]byte, tapeLen)
	if _, err := io.ReadFull(seededReader(seed), tape); err != nil {
		return nil, err
	}
	o := &oracle{cfg: cfg, tape: tape, clk: newClock(seqT0), patch: patch}
	return o, o.rebuild()
}

// rebuild makes a fresh model and replays the accepted steps.
func (o *oracle) rebuild() error {
	o.rd = &tapeReader{tape: o.tape}
	cfg := o.cfg
	cfg.Clock, cfg.Rand = o.clk, o.rd
	m, err := core.NewModel(cfg)
	if err != nil {
		return err
	}
	o.m = m
	for _, h := range o.hist {
		if h.op == nil {
			o.rd.pos += h.burn
			continue
		}
		o.clk.ns.Store(h.now.UnixNano())
		h.op.run(&runner{ctx: noCtx, t0: seqT0, clock: newClock(h.now), book: h.book}, m)
	}
	return nil
}

// run performs op on the model at x's instant and returns its observation.
func (o *oracle) run(x *runner, op op) obs {
	o.clk.ns.Store(x.now().UnixNano())
	pos := o.rd.pos
	res := op.run(x, o.m)
	if !o.patch {
		return res
	}
	switch {
	case res.noop:
		o.hist = append(o.hist, histEntry{burn: o.rd.pos - pos})
		o.mustRebuild()
	case len(res.refused) > 0:
		b := op.(beatOp)
		kept := beatOp{skew: b.skew}
		for i, beat := range b.beats {
			if !contains(res.refused, i) {
				kept.beats = append(kept.beats, beat)
			}
		}
		o.hist = append(o.hist, histEntry{op: kept, now: x.now(), book: x.book.clone()})
		o.mustRebuild()
	default:
		o.hist = append(o.hist, histEntry{op: op, now: x.now(), book: x.book.clone()})
	}
	return res
}

func (o *oracle) mustRebuild() {
	if err := o.rebuild(); err != nil {
		panic("conformance: rebuilding the model: " + err.Error()) // the configuration was accepted once
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// tapeReader reads token bytes from a tape, so that a replay can skip the
// bytes of a step it leaves out.
type tapeReader struct {
	tape []byte
	pos  int
}

var errTapeEnd = errors.New("conformance: token tape exhausted")

func (r *tapeReader) Read(p []byte) (int, error) {
	if r.pos+len(p) > len(r.tape) {
		return 0, errTapeEnd
	}
	n := copy(p, r.tape[r.pos:])
	r.pos += n
	return n, nil
}
