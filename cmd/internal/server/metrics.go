package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/presencekit/presence/core"
)

// metrics is the Prometheus side of the server: it implements the core's
// Metrics hooks and counts HTTP requests, streams and rate limiting, in a
// registry of its own (no global state).
type metrics struct {
	reg *prometheus.Registry

	heartbeats   *prometheus.CounterVec
	errors       *prometheus.CounterVec
	sweeps       *prometheus.CounterVec
	sweepSeconds *prometheus.HistogramVec
	sweepItems   *prometheus.CounterVec
	published    *prometheus.CounterVec
	cacheReads   *prometheus.CounterVec

	requests    *prometheus.CounterVec
	reqSeconds  *prometheus.HistogramVec
	streams     *prometheus.GaugeVec
	rateLimited prometheus.Counter
	usersBy     *prometheus.GaugeVec
	changeLog   *prometheus.CounterVec

	online        *prometheus.GaugeVec
	redisSeconds  prometheus.Histogram
	sweepLast     *prometheus.GaugeVec
	sweepInterval *prometheus.GaugeVec
	history       *prometheus.CounterVec
	outboxWaiting prometheus.Gauge
}

var _ core.Metrics = (*metrics)(nil)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.heartbeats = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_heartbeats_total",
		Help: "Heartbeats handled by the engine, by result (accepted, refused)."}, []string{"result"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_engine_errors_total",
		Help: "Failed engine operations, by operation."}, []string{"op"})
	m.sweeps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_sweeps_total",
		Help: "Sweep passes completed by this instance, by kind (users, scopes)."}, []string{"kind"})
	m.sweepSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "presence_sweep_duration_seconds",
		Help: "Server time of each sweep pass, by kind.", Buckets: []float64{.0005, .001, .005, .01, .05, .1, .5, 1, 5}}, []string{"kind"})
	m.sweepItems = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_sweep_items_total",
		Help: "What sweep passes did, by kind and what (visited, removed, released, held, changes)."}, []string{"kind", "what"})
	m.published = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_published_total",
		Help: "Messages published by the engine, by kind (change, kick)."}, []string{"kind"})
	m.cacheReads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_count_cache_reads_total",
		Help: "Scope count reads through the client-side cache, by result (hit, miss)."}, []string{"result"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_http_requests_total",
		Help: "HTTP requests, by route and status code."}, []string{"route", "code"})
	m.reqSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "presence_http_request_duration_seconds",
		Help: "Time to answer HTTP requests (streams excluded), by route.", Buckets: prometheus.DefBuckets}, []string{"route"})
	m.streams = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_event_streams",
		Help: "Open event streams, by transport (sse, websocket)."}, []string{"transport"})
	m.rateLimited = prometheus.NewCounter(prometheus.CounterOpts{Name: "presence_rate_limited_total",
		Help: "Requests (and batch beats) refused by a rate limit: per user or per client address."})
	m.usersBy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_users_by_status",
		Help: "Users this instance knows to be in each status (see the dashboard's notes on what it knows)."}, []string{"status"})
	m.changeLog = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_change_log_entries_total",
		Help: "Change log entries read by this instance's event hub, and gaps (entries trimmed before it read them)."}, []string{"what"})
	m.online = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_online_users",
		Help: "Users in each published status across every instance sharing the Redis (Engine.Online, read every reconcile)."}, []string{"status"})
	m.redisSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "presence_redis_call_duration_seconds",
		Help:    "Round trip of each call of the engine to Redis (one pipeline of script calls).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}})
	m.sweepLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_sweep_last_completed_timestamp_seconds",
		Help: "Unix time of this instance's last sweep pass that ended without error, by kind."}, []string{"kind"})
	m.sweepInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_sweep_interval_seconds",
		Help: "This instance's sweep interval, by kind (0: it does not sweep)."}, []string{"kind"})
	m.history = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_history_snapshots_total",
		Help: "Online-history snapshot attempts, by result (written, taken: another instance wrote the minute, failed)."}, []string{"result"})
	m.outboxWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: "presence_outbox_waiting",
		Help: "Events written by a deciding script and not yet acknowledged as delivered, in every user bucket's outbox " +
			"across every instance sharing the Redis (read every reconcile)."})
	for _, c := range []prometheus.Collector{m.heartbeats, m.errors, m.sweeps, m.sweepSeconds, m.sweepItems, m.published,
		m.cacheReads, m.requests, m.reqSeconds, m.streams, m.rateLimited, m.usersBy, m.changeLog,
		m.online, m.redisSeconds, m.sweepLast, m.sweepInterval, m.history, m.outboxWaiting,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

// Heartbeats counts heartbeats accepted and refused.
func (m *metrics) Heartbeats(accepted, refused int) {
	m.heartbeats.WithLabelValues("accepted").Add(float64(accepted))
	m.heartbeats.WithLabelValues("refused").Add(float64(refused))
}

// Error counts a failed engine operation.
func (m *metrics) Error(op string, _ error) { m.errors.WithLabelValues(op).Inc() }

// Swept records one sweep pass.
func (m *metrics) Swept(kind string, r core.SweepReport) {
	m.sweeps.WithLabelValues(kind).Inc()
	m.sweepSeconds.WithLabelValues(kind).Observe(r.Duration.Seconds())
	for what, n := range map[string]int{"visited": r.Visited, "removed": r.Removed, "released": r.Released,
		"held": r.Held, "changes": len(r.Changes)} {
		m.sweepItems.WithLabelValues(kind, what).Add(float64(n))
	}
}

// Published counts published messages.
func (m *metrics) Published(kind string, n int) { m.published.WithLabelValues(kind).Add(float64(n)) }

// CacheRead counts a count read through the client-side cache.
func (m *metrics) CacheRead(hit bool) {
	if hit {
		m.cacheReads.WithLabelValues("hit").Inc()
	} else {
		m.cacheReads.WithLabelValues("miss").Inc()
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// observe records one answered request.
func (m *metrics) observe(route string, code int, d time.Duration, stream bool) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	if !stream {
		m.reqSeconds.WithLabelValues(route).Observe(d.Seconds())
	}
}

// timedStore times each Eval of the store it wraps
// (presence_redis_call_duration_seconds). instrument keeps the store's
// optional capabilities (CachedReader, Publisher, Subscriber): the engine
// finds them by type assertion.
type timedStore struct {
	core.Store
	h prometheus.Histogram
}

// Eval times the wrapped store's Eval.
func (t timedStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	start := time.Now()
	res := t.Store.Eval(ctx, calls)
	t.h.Observe(time.Since(start).Seconds())
	return res
}

func instrument(s core.Store, h prometheus.Histogram) core.Store {
	t := timedStore{s, h}
	c, isC := s.(core.CachedReader)
	p, isP := s.(core.Publisher)
	b, isS := s.(core.Subscriber)
	switch {
	case isC && isP && isS:
		return struct {
			timedStore
			core.CachedReader
			core.Publisher
			core.Subscriber
		}{t, c, p, b}
	case isC && isP:
		return struct {
			timedStore
			core.CachedReader
			core.Publisher
		}{t, c, p}
	case isC && isS:
		return struct {
			timedStore
			core.CachedReader
			core.Subscriber
		}{t, c, b}
	case isP && isS:
		return struct {
			timedStore
			core.Publisher
			core.Subscriber
		}{t, p, b}
	case isC:
		return struct {
			timedStore
			core.CachedReader
		}{t, c}
	case isP:
		return struct {
			timedStore
			core.Publisher
		}{t, p}
	case isS:
		return struct {
			timedStore
			core.Subscriber
		}{t, b}
	}
	return t
}

// tee forwards the core's hooks to the server's metrics and to the
// caller's own, when the engine configuration named some.
type tee struct {
	a, b core.Metrics
}

func (t tee) Heartbeats(accepted, refused int) {
	t.a.Heartbeats(accepted, refused)
	t.b.Heartbeats(accepted, refused)
}
func (t tee) Error(op string, err error) { t.a.Error(op, err); t.b.Error(op, err) }
func (t tee) Swept(kind string, r core.SweepReport) {
	t.a.Swept(kind, r)
	t.b.Swept(kind, r)
}
func (t tee) Published(kind string, n int) { t.a.Published(kind, n); t.b.Published(kind, n) }
func (t tee) CacheRead(hit bool)           { t.a.CacheRead(hit); t.b.CacheRead(hit) }
