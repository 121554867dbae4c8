package server

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/presencekit/presence/core"
)

// capStore is a Store with any of the optional capabilities.
type capStore struct{ calls int }

func (c *capStore) Eval(_ context.Context, calls []core.Call) []core.Result {
	c.calls++
	return make([]core.Result, len(calls))
}

type cached struct{ *capStore }

func (cached) CachedGet(context.Context, string) (core.Value, error) { return core.Value{}, nil }
func (cached) FenceCache(context.Context, []string) error            { return nil }

type all struct{ cached }

func (all) Publish(context.Context, string, []byte) error { return nil }
func (all) Subscribe(context.Context, ...string) (<-chan core.Message, func() error, error) {
	return nil, nil, nil
}

// TestInstrumentKeepsCapabilities: the timed store offers exactly the
// optional capabilities of the store it wraps, and times every Eval.
func TestInstrumentKeepsCapabilities(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h"})
	for _, tc := range []struct {
		name          string
		store         core.Store
		cache, pubsub bool
	}{{"plain", &capStore{}, false, false}, {"cached", cached{&capStore{}}, true, false}, {"all", all{cached{&capStore{}}}, true, true}} {
		s := instrument(tc.store, h)
		_, c := s.(core.CachedReader)
		_, p := s.(core.Publisher)
		_, sub := s.(core.Subscriber)
		if c != tc.cache || p != tc.pubsub || sub != tc.pubsub {
			t.Errorf("%s: cache %v publish %v subscribe %v", tc.name, c, p, sub)
		}
		s.Eval(context.Background(), []core.Call{{}})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetHistogram().GetSampleCount() != 3 {
		t.Fatalf("timed calls: %v, %v; want 3", mfs, err)
	}
}
