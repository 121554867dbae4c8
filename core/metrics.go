package core

// Metrics receives the engine's counters. Implementations must be safe for
// concurrent use. Config.Metrics nil means none.
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

// nopMetrics discards everything: the engine's metrics when
// Config.Metrics is nil.
type nopMetrics struct{}

func (nopMetrics) Heartbeats(accepted, refused int) {}
func (nopMetrics) Error(op string, err error)       {}
func (nopMetrics) Swept(kind string, r SweepReport) {}
func (nopMetrics) Published(kind string, n int)     {}
func (nopMetrics) CacheRead(hit bool)               {}
