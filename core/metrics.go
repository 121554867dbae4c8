package core

// Metrics receives the engine's counters. Implementations must be safe for
// concurrent use; NopMetrics can be embedded to implement only some methods.
type Metrics interface {
	// Heartbeats counts heartbeats accepted and refused.
	Heartbeats(accepted, refused int)
	// Error counts a failed operation.
	Error(op string, err error)
	// Swept reports one sweep pass; kind is "users" or "scopes".
	Swept(kind string, r SweepReport)
	// Published counts published messages; kind is "change" or "kick".
	Published(kind string, n int)
	// CacheRead counts a count read served from the client-side cache (hit)
	// or not. The engine cannot see which reads a cache served: a caching
	// adapter reports them (wire rueidis.WithCacheObserver(m.CacheRead)).
	CacheRead(hit bool)
}

// NopMetrics discards everything.
type NopMetrics struct{}

// Heartbeats does nothing.
func (NopMetrics) Heartbeats(accepted, refused int) {}

// Error does nothing.
func (NopMetrics) Error(op string, err error) {}

// Swept does nothing.
func (NopMetrics) Swept(kind string, r SweepReport) {}

// Published does nothing.
func (NopMetrics) Published(kind string, n int) {}

// CacheRead does nothing.
func (NopMetrics) CacheRead(hit bool) {}

var _ Metrics = NopMetrics{}
