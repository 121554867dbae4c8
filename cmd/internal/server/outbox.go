package server

import (
	"context"
	"fmt"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

// outboxLen reads one outbox's length. The Store carries script calls
// only; a call of its own per bucket keeps each in its bucket's slot.
const outboxLen = "return redis.call('HLEN', KEYS[1])"

// outboxWaiting returns the events waiting in the outboxes of every user
// bucket (docs/design.md §7): written by the script that decided them and
// not yet acknowledged as delivered. An outbox holds two bookkeeping
// fields beside its events (keyspace.Layout.Outbox); a missing one holds
// nothing. The buckets are read in one Eval, pipelined where the store can.
func outboxWaiting(ctx context.Context, store core.Store, keys keyspace.Layout) (int64, error) {
	calls := make([]core.Call, keys.UserBuckets)
	for b := range calls {
		calls[b] = core.Call{Source: outboxLen, Keys: []string{keys.Outbox(b)}}
	}
	var waiting int64
	for b, r := range store.Eval(ctx, calls) {
		if r.Err != nil {
			return 0, fmt.Errorf("server: reading the outbox of user bucket %d: %w", b, r.Err)
		}
		if r.Value.Kind != core.ValueInt {
			return 0, fmt.Errorf("server: reading the outbox of user bucket %d: %w: want an integer, got %v", b, core.ErrReply, r.Value)
		}
		waiting += max(r.Value.Int-2, 0)
	}
	return waiting, nil
}

// readOutbox sets presence_outbox_waiting, in the reconcile loop beside
// the other figures read from Redis. A failed read leaves the last figure
// (Redis's trouble shows in the engine's errors and /readyz) and is logged
// at debug level, as a failed reconcile is.
func (s *Server) readOutbox(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	e := s.cfg.Engine
	n, err := outboxWaiting(ctx, s.store, keyspace.New(e.Prefix, e.UserBuckets, e.ScopeBuckets))
	if err != nil {
		if ctx.Err() == nil {
			s.log.DebugContext(ctx, "presence: reading the outboxes failed", "err", err)
		}
		return
	}
	s.m.outboxWaiting.Set(float64(n))
}
