package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/presencekit/presence/core"
)

// metrics is the Prometheus side of the server: it implements the core's
// Metrics hooks and counts HTTP requests, heartbeats, streams and rate
// limiting, in a registry of its own (no global state). Each metric counts
// one quantity; label values hold no spaces.
type metrics struct {
	reg *prometheus.Registry

	heartbeats   *prometheus.CounterVec
	errors       *prometheus.CounterVec
	sweeps       *prometheus.CounterVec
	sweepSeconds *prometheus.HistogramVec
	sweepVisited *prometheus.CounterVec
	sweepChanges *prometheus.CounterVec
	sweepHeld    *prometheus.CounterVec
	sweepRemoved prometheus.Counter
	sweepRelease prometheus.Counter
	published    *prometheus.CounterVec
	cacheReads   *prometheus.CounterVec

	requests    *prometheus.CounterVec
	reqSeconds  *prometheus.HistogramVec
	streams     *prometheus.GaugeVec
	rateLimited *prometheus.CounterVec
	usersBy     *prometheus.GaugeVec
	logRead     prometheus.Counter
	logGaps     prometheus.Counter
	losses      prometheus.Counter

	online        *prometheus.GaugeVec
	redisSeconds  prometheus.Histogram
	redisUp       prometheus.Gauge
	sweepLast     *prometheus.GaugeVec
	sweepInterval *prometheus.GaugeVec
	history       *prometheus.CounterVec
	outboxWaiting prometheus.Gauge
}

var _ core.Metrics = (*metrics)(nil)

// Rate-limit budgets, the values of presence_rate_limited_total's budget.
const (
	budgetSession = "session" // heartbeats, logins, logouts, manual statuses of a user
	budgetScope   = "scope"   // touches and leaves of a caller
	budgetRead    = "read"    // status, count and member reads of a caller
	budgetStream  = "stream"  // event streams opened by a caller
	budgetAddress = "address" // requests without a valid token, per client address
)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m.heartbeats = counterVec("presence_heartbeats_total",
		"Heartbeats answered by this instance, by result (accepted; refused: a 4xx; failed: a 5xx) and, "+
			"for those not accepted, reason (the API error code, such as session_replaced, rate_limited, unavailable).",
		"result", "reason")
	m.errors = counterVec("presence_engine_errors_total",
		"Failed engine operations, by operation (heartbeat, status, sweep_users, change_log, publish, ...).", "op")
	m.sweeps = counterVec("presence_sweeps_total", "Sweep passes completed by this instance, by kind (users, scopes).", "kind")
	m.sweepSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "presence_sweep_duration_seconds",
		Help: "Server time of each sweep pass, by kind.", Buckets: []float64{.0005, .001, .005, .01, .05, .1, .5, 1, 5}}, []string{"kind"})
	m.sweepVisited = counterVec("presence_sweep_visited_total",
		"What sweep passes visited, by kind: users settled (kind users) or scopes finished (kind scopes).", "kind")
	m.sweepChanges = counterVec("presence_sweep_changes_total",
		"Status changes that sweep passes published (expiries, delayed offline changes), by kind.", "kind")
	m.sweepHeld = counterVec("presence_sweep_held_buckets_total",
		"Buckets a sweep pass skipped because another sweeper held their lock, by kind.", "kind")
	m.sweepRemoved = counter("presence_sweep_removed_members_total",
		"Scope members that scope sweeps removed, their window passed.")
	m.sweepRelease = counter("presence_sweep_released_scopes_total",
		"Scopes that scope sweeps released, found empty several sweeps in a row.")
	m.published = counterVec("presence_published_total", "Messages published by the engine, by kind (change, kick).", "kind")
	m.cacheReads = counterVec("presence_count_cache_reads_total",
		"Scope count reads through the client-side cache, by result (hit, miss).", "result")
	m.requests = counterVec("presence_http_requests_total",
		"HTTP requests answered, by listener (api, admin), method, route (the path pattern) and status code.",
		"listener", "method", "route", "code")
	m.reqSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "presence_http_request_duration_seconds",
		Help:    "Time to answer HTTP requests (streams excluded), by listener, method and route.",
		Buckets: prometheus.DefBuckets}, []string{"listener", "method", "route"})
	m.streams = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_event_streams",
		Help: "Open event streams, by transport (sse, websocket)."}, []string{"transport"})
	m.rateLimited = counterVec("presence_rate_limited_total",
		"Requests (and batch beats) refused by a rate limit, by budget: session (a user's heartbeats, logins, logouts, "+
			"manual statuses), scope (touches, leaves), read, stream (streams opened), address (requests without a valid token).",
		"budget")
	m.usersBy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_users_by_status",
		Help: "Users this instance knows to be in each status (see the dashboard's notes on what it knows)."}, []string{"status"})
	m.logRead = counter("presence_change_log_entries_read_total", "Change log entries read by this instance's event hub.")
	m.logGaps = counter("presence_change_log_gaps_total",
		"Times this instance's event hub found change log entries trimmed before it read them; each reset its streams.")
	m.losses = counter("presence_redis_data_losses_total",
		"Losses of Redis's data (a restart without persistence, a failover to an empty replica, FLUSHALL) that this "+
			"instance's event hub read in the change log; each sent its streams one loss event.")
	m.online = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_online_users",
		Help: "Users in each published status across every instance sharing the Redis (Engine.Online, read every reconcile)."}, []string{"status"})
	m.redisSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "presence_redis_call_duration_seconds",
		Help:    "Round trip of each call of the engine to Redis (one pipeline of script calls).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}})
	m.redisUp = prometheus.NewGauge(prometheus.GaugeOpts{Name: "presence_redis_up",
		Help: "1 if this instance's last check of Redis (the /readyz check, every reconcile interval) succeeded, else 0."})
	m.sweepLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_sweep_last_completed_timestamp_seconds",
		Help: "Unix time of this instance's last sweep pass that ended without error, by kind."}, []string{"kind"})
	m.sweepInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_sweep_interval_seconds",
		Help: "This instance's sweep interval, by kind (0: it does not sweep)."}, []string{"kind"})
	m.history = counterVec("presence_history_snapshots_total",
		"Online-history snapshot attempts, by result (written, taken: another instance wrote the minute, failed).", "result")
	m.outboxWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: "presence_outbox_waiting",
		Help: "Events written by a deciding script and not yet acknowledged as delivered, in every user bucket's outbox " +
			"across every instance sharing the Redis (read every reconcile)."})
	for _, c := range []prometheus.Collector{m.heartbeats, m.errors, m.sweeps, m.sweepSeconds, m.sweepVisited,
		m.sweepChanges, m.sweepHeld, m.sweepRemoved, m.sweepRelease, m.published,
		m.cacheReads, m.requests, m.reqSeconds, m.streams, m.rateLimited, m.usersBy, m.logRead, m.logGaps, m.losses,
		m.online, m.redisSeconds, m.redisUp, m.sweepLast, m.sweepInterval, m.history, m.outboxWaiting,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		m.reg.MustRegister(c)
	}
	// Series that exist from the start, so that rates and alerts see a 0
	// before the first event rather than no series.
	m.heartbeats.WithLabelValues("accepted", "")
	for _, b := range []string{budgetSession, budgetScope, budgetRead, budgetStream, budgetAddress} {
		m.rateLimited.WithLabelValues(b)
	}
	for _, k := range []string{"users", "scopes"} {
		m.sweepVisited.WithLabelValues(k)
		m.sweepChanges.WithLabelValues(k)
		m.sweepHeld.WithLabelValues(k)
	}
	return m
}

// Heartbeats does nothing: the server counts each heartbeat it answers,
// with the reason of a refusal the engine's counts do not carry (beat).
func (m *metrics) Heartbeats(accepted, refused int) {}

// beat counts n heartbeats answered with e (nil: accepted).
func (m *metrics) beat(e *Error, n int) {
	switch {
	case n == 0:
	case e == nil:
		m.heartbeats.WithLabelValues("accepted", "").Add(float64(n))
	case e.Status >= 500:
		m.heartbeats.WithLabelValues("failed", e.Code).Add(float64(n))
	default:
		m.heartbeats.WithLabelValues("refused", e.Code).Add(float64(n))
	}
}

// Error counts a failed engine operation; the operation's spaces become
// underscores ("sweep users": sweep_users).
func (m *metrics) Error(op string, _ error) {
	m.errors.WithLabelValues(strings.ReplaceAll(op, " ", "_")).Inc()
}

// Swept records one sweep pass.
func (m *metrics) Swept(kind string, r core.SweepReport) {
	m.sweeps.WithLabelValues(kind).Inc()
	m.sweepSeconds.WithLabelValues(kind).Observe(r.Duration.Seconds())
	m.sweepVisited.WithLabelValues(kind).Add(float64(r.Visited))
	m.sweepChanges.WithLabelValues(kind).Add(float64(len(r.Changes)))
	m.sweepHeld.WithLabelValues(kind).Add(float64(r.Held))
	m.sweepRemoved.Add(float64(r.Removed))
	m.sweepRelease.Add(float64(r.Released))
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

// routeLabels splits a route as wrap names it ("POST /v1/heartbeat",
// "admin GET /metrics", "/") into the listener and the path pattern; the
// method is the request's own (methodLabel), so that a refused DELETE does
// not count as the route's GET.
func routeLabels(route string) (listener, path string) {
	listener = "api"
	if r, ok := strings.CutPrefix(route, "admin "); ok {
		listener, route = "admin", r
	}
	if _, p, ok := strings.Cut(route, " "); ok {
		route = p
	}
	return listener, route
}

// methodLabel is the request's method, or "other" for one HTTP does not
// define, so that clients cannot make up label values.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// observe records one answered request.
func (m *metrics) observe(listener, method, route string, code int, d time.Duration, stream bool) {
	method = methodLabel(method)
	m.requests.WithLabelValues(listener, method, route, strconv.Itoa(code)).Inc()
	if !stream {
		m.reqSeconds.WithLabelValues(listener, method, route).Observe(d.Seconds())
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
