package benchkit

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/presencekit/presence/core"
)

// TimedStore wraps a core.Store and times what the engine spends in script
// calls and in publishing, so that a sweep's report can tell the two apart.
// It always offers core.Publisher and core.BatchPublisher; where the
// wrapped store cannot publish, they do nothing, and where it cannot
// publish a batch, PublishBatch publishes one message at a time.
type TimedStore struct {
	inner core.Store
	pub   core.Publisher
	batch core.BatchPublisher

	evalNs, pubNs atomic.Int64
	evals, pubs   atomic.Int64
}

var (
	_ core.Store          = (*TimedStore)(nil)
	_ core.Publisher      = (*TimedStore)(nil)
	_ core.BatchPublisher = (*TimedStore)(nil)
)

// NewTimedStore wraps s.
func NewTimedStore(s core.Store) *TimedStore {
	t := &TimedStore{inner: s}
	t.pub, _ = s.(core.Publisher)
	t.batch, _ = s.(core.BatchPublisher)
	return t
}

// Eval times and forwards one round of calls.
func (t *TimedStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	t0 := time.Now()
	res := t.inner.Eval(ctx, calls)
	t.evalNs.Add(int64(time.Since(t0)))
	t.evals.Add(1)
	return res
}

// Publish times and forwards one message.
func (t *TimedStore) Publish(ctx context.Context, channel string, message []byte) error {
	if t.pub == nil {
		return nil
	}
	t0 := time.Now()
	err := t.pub.Publish(ctx, channel, message)
	t.pubNs.Add(int64(time.Since(t0)))
	t.pubs.Add(1)
	return err
}

// PublishBatch times and forwards messages published together.
func (t *TimedStore) PublishBatch(ctx context.Context, msgs []core.Message) error {
	if t.pub == nil {
		return nil
	}
	t0 := time.Now()
	var err error
	if t.batch != nil {
		err = t.batch.PublishBatch(ctx, msgs)
	} else {
		for _, m := range msgs {
			if err = t.pub.Publish(ctx, m.Channel, m.Payload); err != nil {
				break
			}
		}
	}
	t.pubNs.Add(int64(time.Since(t0)))
	t.pubs.Add(int64(len(msgs)))
	return err
}

// Stats returns the time spent in Eval and in Publish, and the number of
// Eval rounds and of messages published, since the last Reset.
func (t *TimedStore) Stats() (eval, publish time.Duration, evals, published int64) {
	return time.Duration(t.evalNs.Load()), time.Duration(t.pubNs.Load()), t.evals.Load(), t.pubs.Load()
}

// Reset zeroes the statistics.
func (t *TimedStore) Reset() {
	t.evalNs.Store(0)
	t.pubNs.Store(0)
	t.evals.Store(0)
	t.pubs.Store(0)
}

// Quiet returns s without its optional capabilities (no Publisher, no
// CachedReader): an engine over it changes Redis the same way but
// publishes nothing, so that filling a backlog does not wait on a million
// PUBLISH round trips.
func Quiet(s core.Store) core.Store { return quietStore{s} }

type quietStore struct{ s core.Store }

func (q quietStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	return q.s.Eval(ctx, calls)
}
