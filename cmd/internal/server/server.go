package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presencekit/presence/adapters/sweeper"
	"github.com/presencekit/presence/cmd/history"
	"github.com/presencekit/presence/core"
)

// Config configures a Server. The zero value of every field but
// Auth.Secret (or Auth.InsecureDev) means its documented default.
type Config struct {
	// Engine configures the engine the server builds. The server adds its
	// own Metrics (forwarding to any given), uses Logger when Engine.Logger
	// is nil, and turns the change log on: Engine.ChangeLog defaults to
	// 50,000 entries here. A negative ChangeLog is refused: the event
	// streams need it.
	Engine core.Config
	// Auth configures authentication.
	Auth AuthConfig
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Backend describes the Redis for the logs and the dashboard, such as
	// "embedded miniredis (state kept for the life of the process)".
	Backend string

	// RequestTimeout bounds the handling of every request but the streams.
	// Default 5 s.
	RequestTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers. Default 5 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body: a
	// client that declares a body and does not send it is cut off then.
	// Default 10 s. The streams clear it once they start.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing the answer of every request but the
	// streams, from the end of its headers; it must exceed RequestTimeout.
	// Default RequestTimeout + 10 s. The streams clear it and bound each
	// write by StreamWriteTimeout instead.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its next
	// request. Default 60 s.
	IdleTimeout time.Duration
	// MaxBody caps a request body; MaxBatchBody caps the bodies of the
	// batch endpoints. Defaults 64 KiB and 2 MiB.
	MaxBody, MaxBatchBody int64
	// HeartbeatRate is each user's sustained heartbeats per second, and
	// HeartbeatBurst how many may come at once. Defaults 5 and 20;
	// a negative rate: no limit.
	HeartbeatRate  float64
	HeartbeatBurst int
	// The other per-caller budgets, each a sustained rate per second and a
	// burst (a negative rate: no limit); callers with the admin or service
	// claim are exempt. ScopeRate: touches and leaves of one user, default
	// 10 and 50. ReadRate: status, statuses, counts and member pages of one
	// user, default 20 and 100. StreamRate: event streams opened by one
	// user, default 1 and 10. IPRate: requests of one client address that
	// carry no valid token (the public endpoints but the probes, and refused
	// tokens), default 10 and 50.
	ScopeRate, ReadRate, StreamRate, IPRate     float64
	ScopeBurst, ReadBurst, StreamBurst, IPBurst int
	// MaxStreamsPerUser caps the event streams (SSE and WebSocket) one user
	// holds open at once (admin and service tokens exempt), default 8;
	// MaxStreams caps them all on this instance, default 10,000. A stream
	// beyond either is refused with 429 too_many_streams.
	MaxStreamsPerUser, MaxStreams int

	// CORSOrigins lists the origins ("https://app.example.com") whose pages
	// may call the API across origins: they get CORS answers, preflights
	// included. A request that carries an Origin that is neither its own
	// host nor listed is refused with 403.
	CORSOrigins []string
	// TrustedProxies lists the proxies (CIDRs, or addresses) whose
	// X-Forwarded-For is believed: a request from one of them is from the
	// rightmost forwarded address that is not a trusted proxy, for the
	// per-address budget and the access log. Default none: the peer.
	TrustedProxies []string
	// DeviceClasses names the scope classes that count devices: there a
	// user may also touch and leave as "USER/DEVICE", for a live device
	// of its own. Default none: every class counts users.
	DeviceClasses []string
	// ClassClaims restricts scope classes to the tokens with a claim
	// (class → claim name): touching, leaving, counting and listing a
	// scope of such a class needs the claim (or the admin claim). Default
	// none: every class is open to every signed-in user.
	ClassClaims map[string]string
	// FailureLogEvery is how often repeated request failures (Redis
	// unavailable, internal errors) are logged: the first at once, then
	// one line per interval with their count. The sweeper's and the
	// engine's warnings are throttled to one per message an interval too.
	// Default 10 s.
	FailureLogEvery time.Duration

	// StreamBuffer is how many events may wait for a slow stream before it
	// is ended (its client reconnects and catches up). Default 1024.
	StreamBuffer int
	// StreamPing is how often an idle stream sends a keep-alive. Default 15 s.
	StreamPing time.Duration
	// StreamWriteTimeout bounds one write to a stream. Default 10 s.
	StreamWriteTimeout time.Duration
	// PollInterval is how often the event hub reads the change log when no
	// pub/sub message woke it. Default 1 s.
	PollInterval time.Duration

	// SweepUsers and SweepScopes are the sweeper's intervals (see
	// sweeper.Options). Defaults 1 s and 5 s; negative: no sweeper (another
	// process sweeps).
	SweepUsers, SweepScopes time.Duration
	// ReconcileEvery is how often the dashboard's user counts are re-read.
	// Default 10 s.
	ReconcileEvery time.Duration
	// ScopeRefresh is how often the dashboard's scope counts are re-read.
	// Default 2 s.
	ScopeRefresh time.Duration
	// MaxTrackedUsers and MaxTrackedScopes bound the dashboard's state.
	// Defaults 100,000 and 200.
	MaxTrackedUsers, MaxTrackedScopes int

	// Ready checks that Redis answers, for /readyz. Default: a trivial
	// script through the store.
	Ready func(ctx context.Context) error
	// DrainTimeout bounds the graceful shutdown of Serve. Default 10 s.
	DrainTimeout time.Duration

	// History configures the online-history snapshotter that Run runs
	// (package history): with a Store or a DSN it records every minute the
	// online counts, the busiest tracked scopes of each class and, with
	// Users, the users this instance knows to be online; GET /v1/history
	// reads them back. Source, Logger and OnResult default to the
	// server's. Without a Store or DSN there is no history.
	History history.Config
}

// Server is the presence HTTP service: the JSON API, the event streams,
// the dashboard and the operational endpoints, over one engine. Several
// servers may share one Redis: the state, the change log and the pub/sub
// channels are all there.
type Server struct {
	cfg     Config
	eng     *core.Engine
	store   core.Store // as given: reads that are not the engine's calls (the outbox gauge), untimed
	log     *slog.Logger
	auth    *authenticator
	limiter *limiter // heartbeats, logins, logouts, manual statuses: per user acted for
	// scopeLim, readLim and streamLim are the other per-user budgets,
	// ipLim the per-address budget of requests without a valid token.
	scopeLim, readLim, streamLim, ipLim *limiter
	origins                             map[string]bool
	proxies                             []netip.Prefix
	deviceClasses                       map[string]bool
	failures                            *failureLog
	m                                   *metrics
	hub                                 *hub
	users                               *userTracker
	scopes                              *scopeTracker
	sweeps                              *sweepLog
	snaps                               *history.Snapshotter // nil: no online history
	mux                                 *http.ServeMux
	started                             time.Time

	draining atomic.Bool
	drain    chan struct{} // closed by Drain: streams end
	drainMu  sync.Once
	// streamsMu orders streams.Add against Drain's Wait: no stream is
	// added once draining is set.
	streamsMu sync.Mutex
	streams   sync.WaitGroup
	nstreams  atomic.Int64
	readyMu   sync.Mutex
	readyCall *readyCall // the /readyz check in flight, if any

	// open and userStreams count the streams admitted by openStream, in
	// all and per user, under streamsMu.
	open        int
	userStreams map[string]int
}

// New returns a server over store. It returns ErrNoSecret when neither a
// JWT secret nor InsecureDev is configured, and the engine's
// *core.InputError for an invalid engine configuration.
func New(store core.Store, cfg Config) (*Server, error) {
	if store == nil {
		return nil, errors.New("server: nil store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setDur(&cfg.RequestTimeout, 5*time.Second)
	setDur(&cfg.ReadHeaderTimeout, 5*time.Second)
	setDur(&cfg.ReadTimeout, 10*time.Second)
	setDur(&cfg.WriteTimeout, cfg.RequestTimeout+10*time.Second)
	setDur(&cfg.IdleTimeout, 60*time.Second)
	setDur(&cfg.FailureLogEvery, 10*time.Second)
	setDur(&cfg.StreamPing, 15*time.Second)
	setDur(&cfg.StreamWriteTimeout, 10*time.Second)
	setDur(&cfg.PollInterval, time.Second)
	setDur(&cfg.SweepUsers, time.Second)
	setDur(&cfg.SweepScopes, 5*time.Second)
	setDur(&cfg.ReconcileEvery, 10*time.Second)
	setDur(&cfg.ScopeRefresh, 2*time.Second)
	setDur(&cfg.DrainTimeout, 10*time.Second)
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 64 << 10
	}
	if cfg.MaxBatchBody == 0 {
		cfg.MaxBatchBody = 2 << 20
	}
	if cfg.HeartbeatRate == 0 {
		cfg.HeartbeatRate = 5
	}
	if cfg.HeartbeatBurst == 0 {
		cfg.HeartbeatBurst = 20
	}
	setRate := func(r *float64, b *int, defR float64, defB int) {
		if *r == 0 {
			*r = defR
		}
		if *b == 0 {
			*b = defB
		}
	}
	setRate(&cfg.ScopeRate, &cfg.ScopeBurst, 10, 50)
	setRate(&cfg.ReadRate, &cfg.ReadBurst, 20, 100)
	setRate(&cfg.StreamRate, &cfg.StreamBurst, 1, 10)
	setRate(&cfg.IPRate, &cfg.IPBurst, 10, 50)
	if cfg.MaxStreamsPerUser == 0 {
		cfg.MaxStreamsPerUser = 8
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = 10_000
	}
	if cfg.StreamBuffer == 0 {
		cfg.StreamBuffer = 1024
	}
	if cfg.MaxTrackedUsers == 0 {
		cfg.MaxTrackedUsers = 100_000
	}
	if cfg.MaxTrackedScopes == 0 {
		cfg.MaxTrackedScopes = 200
	}
	if cfg.PollInterval < 0 || cfg.RequestTimeout < 0 || cfg.StreamBuffer < 1 || cfg.HeartbeatBurst < 1 ||
		cfg.MaxBody < 1 || cfg.MaxBatchBody < 1 || cfg.MaxTrackedUsers < 1 || cfg.MaxTrackedScopes < 1 ||
		cfg.ReadHeaderTimeout < 0 || cfg.ReadTimeout < 0 || cfg.WriteTimeout < 0 || cfg.IdleTimeout < 0 ||
		cfg.ScopeBurst < 1 || cfg.ReadBurst < 1 || cfg.StreamBurst < 1 || cfg.IPBurst < 1 ||
		cfg.MaxStreamsPerUser < 1 || cfg.MaxStreams < 1 || cfg.FailureLogEvery < 0 {
		return nil, errors.New("server: negative or zero limits in Config")
	}
	if cfg.WriteTimeout <= cfg.RequestTimeout {
		return nil, errors.New("server: WriteTimeout must exceed RequestTimeout, or a timed-out request gets no answer")
	}
	origins, err := parseOrigins(cfg.CORSOrigins)
	if err != nil {
		return nil, err
	}
	proxies, err := parseProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	classes := cfg.Engine.Classes
	if classes == nil {
		classes = core.DefaultClasses()
	}
	for _, c := range cfg.DeviceClasses {
		if _, ok := classes[c]; !ok {
			return nil, fmt.Errorf("server: DeviceClasses: no scope class %q", c)
		}
	}
	for c, claim := range cfg.ClassClaims {
		if _, ok := classes[c]; !ok || claim == "" {
			return nil, fmt.Errorf("server: ClassClaims: no scope class %q, or no claim for it", c)
		}
	}
	// Last of the checks: with a JWKS URL, it fetches the key set.
	auth, err := newAuthenticator(cfg.Auth, throttled(cfg.Logger, cfg.FailureLogEvery))
	if err != nil {
		return nil, err
	}
	ecfg := cfg.Engine
	switch {
	case ecfg.ChangeLog == 0:
		ecfg.ChangeLog = 50_000
	case ecfg.ChangeLog < 0:
		return nil, errors.New("server: the event streams need the change log (Engine.ChangeLog > 0)")
	}
	m := newMetrics()
	if ecfg.Metrics != nil {
		ecfg.Metrics = tee{m, ecfg.Metrics}
	} else {
		ecfg.Metrics = m
	}
	if ecfg.Logger == nil {
		ecfg.Logger = throttled(cfg.Logger, cfg.FailureLogEvery)
	}
	eng, err := core.New(instrument(store, m.redisSeconds), ecfg)
	if err != nil {
		return nil, err
	}
	cfg.Engine = ecfg
	s := &Server{cfg: cfg, eng: eng, store: store, log: cfg.Logger, auth: auth, m: m, started: time.Now(),
		users: newUserTracker(cfg.MaxTrackedUsers), scopes: newScopeTracker(cfg.MaxTrackedScopes),
		sweeps: newSweepLog(50), drain: make(chan struct{})}
	s.limiter = newLimiter(budgetSession, cfg.HeartbeatRate, cfg.HeartbeatBurst)
	s.scopeLim = newLimiter(budgetScope, cfg.ScopeRate, cfg.ScopeBurst)
	s.readLim = newLimiter(budgetRead, cfg.ReadRate, cfg.ReadBurst)
	s.streamLim = newLimiter(budgetStream, cfg.StreamRate, cfg.StreamBurst)
	s.ipLim = newLimiter(budgetAddress, cfg.IPRate, cfg.IPBurst)
	s.origins, s.proxies = origins, proxies
	s.deviceClasses = map[string]bool{}
	for _, c := range cfg.DeviceClasses {
		s.deviceClasses[c] = true
	}
	s.failures = &failureLog{log: cfg.Logger, every: cfg.FailureLogEvery}
	s.userStreams = map[string]int{}
	s.hub = newHub(eng, cfg.Logger, m, cfg.PollInterval, cfg.StreamBuffer, func(e core.LoggedChange) { s.users.apply(e.Change) })
	if s.cfg.Ready == nil {
		s.cfg.Ready = func(ctx context.Context) error {
			_, err := eng.Ping(ctx)
			return err
		}
	}
	if s.snaps, err = s.newSnapshotter(cfg.History); err != nil {
		return nil, err
	}
	for kind, d := range map[string]time.Duration{"users": cfg.SweepUsers, "scopes": cfg.SweepScopes} {
		if cfg.SweepUsers < 0 || cfg.SweepScopes < 0 {
			d = 0
		}
		m.sweepInterval.WithLabelValues(kind).Set(d.Seconds())
	}
	s.routes()
	return s, nil
}

// Engine returns the server's engine.
func (s *Server) Engine() *core.Engine { return s.eng }

// Metrics returns the core metrics hooks the server feeds Prometheus with,
// for a store option such as the rueidis adapter's WithCacheObserver.
func (s *Server) Metrics() core.Metrics { return s.m }

// Handler returns the HTTP handler: the API under /v1/, the dashboard under
// /dashboard/, and /healthz, /readyz and /metrics.
func (s *Server) Handler() http.Handler { return s.mux }

// Run does the server's background work until ctx ends: the event hub
// (reading the change log), the sweeper, and the dashboard's refreshes. It
// returns ctx's error.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { s.hub.run(ctx) })
	wg.Go(func() { s.failures.run(ctx) })
	wg.Go(func() { s.watchRedis(ctx) })
	if s.auth.jwks != nil {
		wg.Go(func() { s.auth.jwks.run(ctx) })
	}
	if s.snaps != nil {
		wg.Go(func() { _ = s.snaps.Run(ctx) })
	}
	if s.cfg.SweepUsers > 0 && s.cfg.SweepScopes > 0 {
		wg.Go(func() {
			_ = sweeper.Run(ctx, s.eng, sweeper.Options{UserInterval: s.cfg.SweepUsers, ScopeInterval: s.cfg.SweepScopes,
				Logger: throttled(s.log, s.cfg.FailureLogEvery), OnReport: s.onSweep})
		})
	}
	wg.Go(func() {
		t := time.NewTicker(s.cfg.ReconcileEvery)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-s.hub.ready:
		}
		for {
			if err := s.users.reconcile(ctx, s.eng); err != nil && ctx.Err() == nil {
				s.log.DebugContext(ctx, "presence: reconciling user statuses failed", "err", err)
			}
			s.publishGauges()
			if on, err := s.eng.Online(ctx); err == nil {
				for st, n := range on {
					s.m.online.WithLabelValues(st.String()).Set(float64(n))
				}
			}
			s.readOutbox(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	wg.Go(func() {
		t := time.NewTicker(s.cfg.ScopeRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				s.scopes.refresh(ctx, s.eng, now, time.Minute)
				for _, l := range []*limiter{s.limiter, s.scopeLim, s.readLim, s.streamLim, s.ipLim} {
					l.prune(now)
				}
			}
		}
	})
	wg.Wait()
	return ctx.Err()
}

func (s *Server) publishGauges() {
	ov := s.users.overview(0)
	for st, n := range ov.ByStatus {
		s.m.usersBy.WithLabelValues(st).Set(float64(n))
	}
}

// onSweep records a sweeper pass and shows it on the streams that asked.
func (s *Server) onSweep(kind string, r core.SweepReport, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	if err == nil {
		s.m.sweepLast.WithLabelValues(kind).SetToCurrentTime()
	}
	rep := wireSweep(kind, r, err, time.Now())
	if s.sweeps.record(rep) {
		s.hub.broadcast(event{kind: EventSweep, data: rep})
	}
}

// Drain ends every open event stream gracefully (each sends what it has
// queued and a "bye" event, so that its client reconnects elsewhere with
// Last-Event-ID), refuses new ones, turns /readyz unready, and waits for
// the streams to end or ctx to expire.
func (s *Server) Drain(ctx context.Context) error {
	s.drainMu.Do(func() {
		s.streamsMu.Lock()
		defer s.streamsMu.Unlock()
		s.draining.Store(true)
		close(s.drain)
	})
	done := make(chan struct{})
	go func() { s.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// HTTPServer returns an http.Server for the handler with the configured
// deadlines (ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout):
// what Serve runs, for a program that serves it itself (with TLS, say).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Serve answers HTTP on ln and runs the background work until ctx ends,
// then shuts down gracefully: it drains the streams, lets requests in
// flight finish (within DrainTimeout), and stops the background work.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := s.HTTPServer()
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	ran := make(chan struct{})
	go func() { defer close(ran); _ = s.Run(runCtx) }()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	s.log.Info("presence: shutting down: draining streams", "streams", s.nstreams.Load())
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	drainErr := s.Drain(dctx)
	shutErr := hs.Shutdown(dctx)
	stopRun()
	<-ran
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	if err := errors.Join(drainErr, shutErr); err != nil {
		return fmt.Errorf("server: graceful shutdown: %w", err)
	}
	s.log.Info("presence: stopped")
	return nil
}

// watchRedis runs the /readyz check of Redis (Config.Ready) at once and
// then every ReconcileEvery, and reports its result as presence_redis_up:
// the alert on a Redis that cannot be reached reads it.
func (s *Server) watchRedis(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReconcileEvery)
	defer t.Stop()
	for {
		err := s.checkReady(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			s.m.redisUp.Set(1)
		} else {
			s.m.redisUp.Set(0)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
