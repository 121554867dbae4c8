package conformance

import (
	"context"

	"github.com/presencekit/presence/core"
)

// Interceptor rewrites the traffic between an engine and its Store: calls
// and replies, cached reads. A nil field passes that kind of traffic
// through unchanged. Each function gets next, which forwards to the
// wrapped Store. Events are published by script calls (lua/outbox_ack.lua),
// so Eval sees them too.
type Interceptor struct {
	// Eval sees every batch of script calls; it may rewrite the calls
	// (another script source, other arguments), the results, or both.
	Eval func(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result
	// CachedGet sees every read through the client-side cache.
	CachedGet func(ctx context.Context, key string, next func(context.Context, string) (core.Value, error)) (core.Value, error)
}

// Intercept returns a Store that sends s's traffic through in. It has
// the optional capabilities of s (core.Publisher, core.Subscriber,
// core.CachedReader), so that an engine built on it behaves as one built on
// s would, apart from what in rewrites, but for core.BatchPublisher: its
// engine publishes a message without an outbox ID one at a time.
func Intercept(s core.Store, in Interceptor) core.Store {
	w := &wrapped{s: s, in: in}
	p, isPub := s.(core.Publisher)
	sub, isSub := s.(core.Subscriber)
	cache, isCache := s.(core.CachedReader)
	w.cache = cache
	c := wrappedCache{w}
	switch {
	case isPub && isSub && isCache:
		return struct {
			core.Store
			core.Publisher
			core.Subscriber
			core.CachedReader
		}{w, p, sub, c}
	case isPub && isSub:
		return struct {
			core.Store
			core.Publisher
			core.Subscriber
		}{w, p, sub}
	case isPub && isCache:
		return struct {
			core.Store
			core.Publisher
			core.CachedReader
		}{w, p, c}
	case isSub && isCache:
		return struct {
			core.Store
			core.Subscriber
			core.CachedReader
		}{w, sub, c}
	case isPub:
		return struct {
			core.Store
			core.Publisher
		}{w, p}
	case isSub:
		return struct {
			core.Store
			core.Subscriber
		}{w, sub}
	case isCache:
		return struct {
			core.Store
			core.CachedReader
		}{w, c}
	}
	return w
}

type wrapped struct {
	s     core.Store
	in    Interceptor
	cache core.CachedReader
}

func (w *wrapped) Eval(ctx context.Context, calls []core.Call) []core.Result {
	if w.in.Eval == nil {
		return w.s.Eval(ctx, calls)
	}
	return w.in.Eval(ctx, calls, w.s.Eval)
}

type wrappedCache struct{ w *wrapped }

func (c wrappedCache) CachedGet(ctx context.Context, key string) (core.Value, error) {
	if c.w.in.CachedGet == nil {
		return c.w.cache.CachedGet(ctx, key)
	}
	return c.w.in.CachedGet(ctx, key, c.w.cache.CachedGet)
}

func (c wrappedCache) FenceCache(ctx context.Context, keys []string) error {
	return c.w.cache.FenceCache(ctx, keys)
}
