package server

import (
	"context"
	"errors"
	"testing"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

// lenStore answers every call with the next of its replies, and records
// the keys it was asked for.
type lenStore struct {
	replies []core.Result
	keys    []string
}

func (s *lenStore) Eval(_ context.Context, calls []core.Call) []core.Result {
	out := make([]core.Result, len(calls))
	for i, c := range calls {
		s.keys = append(s.keys, c.Keys...)
		out[i] = s.replies[i%len(s.replies)]
	}
	return out
}

// TestOutboxWaitingSums: the figure is each bucket's outbox length less
// its two bookkeeping fields, floored at 0 (a missing outbox), summed;
// every bucket's outbox is read; a failed read is an error, not a figure.
func TestOutboxWaitingSums(t *testing.T) {
	if _, err := core.New(&lenStore{}, core.Config{Prefix: "ob", UserBuckets: 4}); err != nil {
		t.Fatal(err)
	}
	keys := keyspace.New("ob", 4, 0)
	n := func(v int64) core.Result { return core.Result{Value: core.Value{Kind: core.ValueInt, Int: v}} }
	st := &lenStore{replies: []core.Result{n(0), n(2), n(7), n(3)}}
	got, err := outboxWaiting(context.Background(), st, keys)
	if err != nil || got != 6 {
		t.Fatalf("outboxWaiting = %d, %v; want 0+0+5+1 = 6", got, err)
	}
	if len(st.keys) != 4 {
		t.Fatalf("read %v, want the 4 buckets' outboxes", st.keys)
	}
	for b, k := range st.keys {
		if k != keys.Outbox(b) {
			t.Errorf("call %d read %q, want %q", b, k, keys.Outbox(b))
		}
	}
	down := &lenStore{replies: []core.Result{n(9), {Err: core.ErrUnavailable}}}
	if got, err := outboxWaiting(context.Background(), down, keys); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("a failed read: %d, %v; want ErrUnavailable", got, err)
	}
}
