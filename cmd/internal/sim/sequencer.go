package sim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/presencekit/presence/core"
)

// countingStore counts round trips and script calls that ran. A NOSCRIPT
// answer (the core then resends the script's source) is not counted: how
// many there are depends on which edge's first call reaches a fresh
// server first, and the counts should not.
type countingStore struct {
	inner        core.Store
	trips, calls atomic.Int64
}

// Eval forwards to the inner store.
func (s *countingStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	res := s.inner.Eval(ctx, calls)
	ran := 0
	for _, r := range res {
		if !errors.Is(r.Err, core.ErrNoScript) {
			ran++
		}
	}
	if ran > 0 {
		s.trips.Add(1)
		s.calls.Add(int64(ran))
	}
	return res
}

// sequencer lets the edges, which run their batches at once, reach Redis
// in a fixed order: their WebAssembly work overlaps, their scripts do
// not, so that a run is the same every time (two beats of one user at one
// instant, through two edges, may publish differently in either order).
type sequencer struct {
	mu   sync.Mutex
	cond *sync.Cond
	next int // the ticket whose turn it is
}

func newSequencer() *sequencer {
	s := &sequencer{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *sequencer) wait(ticket int) {
	s.mu.Lock()
	for s.next != ticket {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// turn returns the ticket whose turn it is.
func (s *sequencer) turn() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

func (s *sequencer) done(ticket int) {
	s.mu.Lock()
	s.next = ticket + 1
	s.cond.Broadcast()
	s.mu.Unlock()
}

// edgeStore is an edge's view of the shared store. During a sequenced
// call (ticket ≥ 0) it waits for the ticket's turn before the call's first
// script reaches Redis, and keeps the turn until the call returns: a batch
// call may take more than one round trip (the beats the steady script
// leaves to the full one, a change log append), and each of them must
// reach Redis in the same order every run, not whenever its edge gets
// there first.
type edgeStore struct {
	inner     core.Store
	sequencer *sequencer
	ticket    int
	holding   bool
}

// Eval waits for the turn, if any, and forwards to the shared store.
func (s *edgeStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	if s.ticket >= 0 && !s.holding {
		s.sequencer.wait(s.ticket)
		s.holding = true
	}
	return s.inner.Eval(ctx, calls)
}

// sequenced runs f as the call of the given ticket.
func (s *edgeStore) sequenced(ticket int, f func()) {
	s.ticket, s.holding = ticket, false
	f()
	if !s.holding {
		s.sequencer.wait(ticket)
	}
	s.sequencer.done(ticket)
	s.ticket, s.holding = -1, false
}
