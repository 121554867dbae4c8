package conformance

import (
	"errors"
	"io"

	"github.com/presencekit/presence/core"
)

// oracle is the reference side of a sequence: core.Model on the sequence's
// clock, fed the same token bytes as the engine.
type oracle struct {
	clk *clock
	m   *core.Model
}

// tapeLen bounds the token bytes of one sequence: 8 bytes a token, a few
// tokens a step.
const tapeLen = 16 << 10

func newOracle(cfg core.Config, seed uint64) (*oracle, error) {
	tape := make([]byte, tapeLen)
	if _, err := io.ReadFull(seededReader(seed), tape); err != nil {
		return nil, err
	}
	o := &oracle{clk: newClock(seqT0)}
	cfg.Clock, cfg.Rand = o.clk.Now, &tapeReader{tape: tape}
	m, err := core.NewModel(cfg)
	if err != nil {
		return nil, err
	}
	o.m = m
	return o, nil
}

// run performs op on the model at x's instant and returns its observation.
func (o *oracle) run(x *runner, op op) obs {
	o.clk.ns.Store(x.now().UnixNano())
	return op.run(x, o.m)
}

// tapeReader reads token bytes from a tape: the first bytes of the stream
// the engine draws its tokens from.
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
