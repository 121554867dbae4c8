package server

import (
	"bufio"
	"context"
	"embed"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sort"
	"time"

	jsclient "github.com/presencekit/presence/clients/js"
	"github.com/presencekit/presence/core"
)

// dashboardFiles is the dashboard: plain HTML, JavaScript and CSS, served
// as they are (no build step).
//
//go:embed dashboard
var dashboardFiles embed.FS

// access is who may call a route.
type access int

const (
	public    access = iota // no token
	signedIn                // any valid token (or insecure-dev)
	adminOnly               // a token with the admin claim
	trusted                 // the admin listener: no token, acts as an admin
)

// handlerFunc is an API handler: it writes its answer, or returns the
// error to send.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p Principal) *Error

func (s *Server) routes() {
	mux := http.NewServeMux()
	s.mux = mux
	api := func(method, path string, acc access, h handlerFunc) {
		mux.Handle(path, s.wrap(method+" "+path, method, acc, false, h))
	}
	api("POST", "/v1/heartbeat", signedIn, s.heartbeat)
	api("POST", "/v1/heartbeats", signedIn, s.heartbeats)
	api("POST", "/v1/login", signedIn, s.login)
	api("POST", "/v1/logout", signedIn, s.logout)
	api("POST", "/v1/disconnect", signedIn, s.disconnect)
	api("PUT", "/v1/users/{user}/manual", signedIn, s.manual)
	api("GET", "/v1/users/{user}/status", signedIn, s.status)
	api("POST", "/v1/statuses", signedIn, s.statuses)
	api("POST", "/v1/scopes/{class}/{id}/touch", signedIn, s.touch)
	api("POST", "/v1/scopes/{class}/{id}/leave", signedIn, s.leave)
	api("GET", "/v1/scopes/{class}/{id}/count", signedIn, s.count)
	api("GET", "/v1/scopes/{class}/{id}/members", signedIn, s.members)
	api("GET", "/v1/admin/sweeper", adminOnly, s.sweeper)
	api("GET", "/v1/admin/overview", adminOnly, s.overview)
	api("GET", "/v1/history", adminOnly, s.history)
	api("GET", "/v1/info", public, s.info)
	mux.Handle("/v1/events", s.wrap("GET /v1/events", "GET", signedIn, true, s.sse))
	mux.Handle("/v1/ws", s.wrap("GET /v1/ws", "GET", signedIn, true, s.websocket))
	mux.Handle("/healthz", s.wrap("GET /healthz", "GET", public, false, func(w http.ResponseWriter, _ *http.Request, _ Principal) *Error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	}))
	mux.Handle("/readyz", s.wrap("GET /readyz", "GET", public, false, s.readyz))
	mux.Handle("/metrics", s.wrap("GET /metrics", "GET", adminOnly, false, s.metricsHandler()))
	static, _ := fs.Sub(dashboardFiles, "dashboard")
	files := http.StripPrefix("/dashboard/", http.FileServerFS(static))
	mux.Handle("/dashboard/", s.wrap("GET /dashboard/", "", public, false, func(w http.ResponseWriter, r *http.Request, _ Principal) *Error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return apiErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "use GET")
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
		return nil
	}))
	mux.Handle("/examples/", s.wrap("GET /examples/", "", public, false, s.examples()))
	mux.Handle("/", s.wrap("/", "", public, false, func(w http.ResponseWriter, r *http.Request, _ Principal) *Error {
		if r.URL.Path == "/" {
			http.Redirect(w, r, "/dashboard/", http.StatusFound)
			return nil
		}
		return apiErr(http.StatusNotFound, CodeNotFound, "no endpoint %s", r.URL.Path)
	}))
}

// examples serves the browser client's example page under /examples/, with
// the client itself as /examples/presence.js (and its declarations), as
// they are in clients/js.
func (s *Server) examples() handlerFunc {
	page, _ := fs.Sub(jsclient.Files, "example")
	pages := http.StripPrefix("/examples/", http.FileServerFS(page))
	client := http.StripPrefix("/examples/", http.FileServerFS(jsclient.Files))
	return func(w http.ResponseWriter, r *http.Request, _ Principal) *Error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return apiErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "use GET")
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; style-src 'self'; script-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch r.URL.Path {
		case "/examples/presence.js", "/examples/presence.d.ts":
			client.ServeHTTP(w, r)
		default:
			pages.ServeHTTP(w, r)
		}
		return nil
	}
}

func (s *Server) metricsHandler() handlerFunc {
	metrics := s.m.handler()
	return func(w http.ResponseWriter, r *http.Request, _ Principal) *Error {
		metrics.ServeHTTP(w, r)
		return nil
	}
}

// AdminHandler returns the operator's handler, for a listener of its own
// that only operators reach (presence serve --admin-addr): /metrics, the
// admin endpoints, /healthz and /readyz, without a token.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.wrap("admin GET /metrics", "GET", trusted, false, s.metricsHandler()))
	mux.Handle("/v1/admin/sweeper", s.wrap("admin GET /v1/admin/sweeper", "GET", trusted, false, s.sweeper))
	mux.Handle("/v1/admin/overview", s.wrap("admin GET /v1/admin/overview", "GET", trusted, false, s.overview))
	mux.Handle("/v1/history", s.wrap("admin GET /v1/history", "GET", trusted, false, s.history))
	mux.Handle("/v1/info", s.wrap("admin GET /v1/info", "GET", trusted, false, s.info))
	mux.Handle("/healthz", s.wrap("admin GET /healthz", "GET", trusted, false, func(w http.ResponseWriter, _ *http.Request, _ Principal) *Error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	}))
	mux.Handle("/readyz", s.wrap("admin GET /readyz", "GET", trusted, false, s.readyz))
	mux.Handle("/", s.wrap("admin /", "", trusted, false, func(w http.ResponseWriter, r *http.Request, _ Principal) *Error {
		return apiErr(http.StatusNotFound, CodeNotFound, "no endpoint %s on the admin listener", r.URL.Path)
	}))
	return mux
}

// wrap applies what every route shares: method check, authentication,
// the request timeout (not on streams), panic recovery, metrics and the
// access log.
func (s *Server) wrap(route, method string, acc access, stream bool, h handlerFunc) http.Handler {
	listener, path := routeLabels(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		var p Principal
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "presence: handler panic", "route", route, "panic", v, "stack", string(debug.Stack()))
				if !rec.wrote {
					writeError(rec, apiErr(http.StatusInternalServerError, CodeInternal, "internal error"))
				}
			}
			s.m.observe(listener, r.Method, path, rec.status(), time.Since(start), stream)
			s.accessLog(r, route, rec.status(), time.Since(start), p)
		}()
		if s.cfg.Auth.InsecureDev {
			w.Header().Set("X-Presence-Insecure", "1")
		}
		// refuse answers before the body is read: the connection is closed
		// after the answer rather than kept to read a body nobody wants
		// (which a client could hold back).
		refuse := func(e *Error) {
			if r.ContentLength == 0 || r.ProtoMajor != 1 {
				writeError(rec, e)
				return
			}
			w.Header().Set("Connection", "close")
			writeError(rec, e)
			// net/http would otherwise read what is left of the body
			// before closing, for as long as the client holds it back.
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			_ = rc.SetReadDeadline(time.Now())
		}
		origin := r.Header.Get("Origin")
		allowed, listed := s.originAllowed(r)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			if e := s.preflight(rec, r, method); e != nil {
				refuse(e)
			}
			return
		}
		if !allowed {
			refuse(forbidden("origin %q may not call this service (see --cors-origins)", origin))
			return
		}
		if listed {
			corsHeaders(w.Header(), origin)
		}
		if method != "" && r.Method != method {
			w.Header().Set("Allow", method)
			refuse(apiErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s takes %s, not %s", r.URL.Path, method, r.Method))
			return
		}
		if method != "" && writes(method) {
			if e := checkContentType(r); e != nil {
				refuse(e)
				return
			}
		}
		switch acc {
		case trusted:
			p = Principal{Admin: true, Read: true}
		case public:
			if route != "GET /healthz" && route != "GET /readyz" { // probes poll often
				if e := s.rateLimited(s.ipLim, s.clientIP(r), "requests without a token"); e != nil {
					refuse(e)
					return
				}
			}
		default:
			var e *Error
			if p, e = s.auth.authenticate(r, stream); e != nil {
				if le := s.rateLimited(s.ipLim, s.clientIP(r), "requests without a valid token"); le != nil {
					e = le
				}
				refuse(e)
				return
			}
			if acc == adminOnly && !p.Admin {
				refuse(forbidden("this endpoint needs a token with the %q claim", s.auth.cfg.AdminClaim))
				return
			}
		}
		ctx := withPrincipal(r.Context(), p)
		if !stream {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
			defer cancel()
		}
		body := &bodyReader{ReadCloser: r.Body}
		r.Body = body
		if e := h(rec, r.WithContext(ctx), p); e != nil && !rec.wrote {
			if e.Status >= 500 && e.cause != nil {
				s.failures.record(r.Context(), route, e.Code, e.cause)
			}
			if body.eof {
				writeError(rec, e) // the connection may serve the next request
			} else {
				refuse(e)
			}
		}
	})
}

// bodyReader notes whether a handler read the request body to its end.
type bodyReader struct {
	io.ReadCloser
	eof bool
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (s *Server) accessLog(r *http.Request, route string, code int, d time.Duration, p Principal) {
	level := slog.LevelDebug
	switch {
	case code == http.StatusServiceUnavailable:
		// Redis is down or the instance drains: the failure log reports
		// these once an interval, not once a request.
	case code >= 500:
		level = slog.LevelWarn
	case code >= 400:
		level = slog.LevelInfo
	}
	// The query is left out on purpose: it may hold an access token.
	s.log.Log(r.Context(), level, "http", "method", r.Method, "route", route, "path", r.URL.Path,
		"status", code, "duration", d, "user", p.User, "remote", r.RemoteAddr, "client", s.clientIP(r))
}

// recorder remembers the status a handler sent; it passes Flush and Hijack
// through for the streams.
type recorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.code, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client.
func (r *recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

// Hijack hands the connection over (WebSocket).
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.code, r.wrote = http.StatusSwitchingProtocols, true
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.code
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ Principal) *Error {
	if s.draining.Load() {
		return apiErr(http.StatusServiceUnavailable, CodeShuttingDown, "the instance is shutting down")
	}
	select {
	case <-s.hub.ready:
	default:
		return apiErr(http.StatusServiceUnavailable, CodeUnavailable, "starting: the change log has not been read yet")
	}
	if err := s.checkReady(r.Context()); err != nil {
		return apiErr(http.StatusServiceUnavailable, CodeUnavailable, "redis does not answer: %v", err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// checkReady runs Config.Ready, once for all the probes that ask at the
// same time: /readyz needs no token and has no per-address budget, so a
// flood of it costs Redis one check at a time.
func (s *Server) checkReady(ctx context.Context) error {
	s.readyMu.Lock()
	c := s.readyCall
	if c == nil {
		c = &readyCall{done: make(chan struct{})}
		s.readyCall = c
		go func() {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c.err = s.cfg.Ready(rctx)
			s.readyMu.Lock()
			s.readyCall = nil
			s.readyMu.Unlock()
			close(c.done)
		}()
	}
	s.readyMu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readyCall is one Config.Ready check in flight.
type readyCall struct {
	done chan struct{}
	err  error
}

// InfoResponse is the body of GET /v1/info: what a client (the dashboard)
// needs to know about this service. It needs no token.
type InfoResponse struct {
	Service string `json:"service"`
	// Auth is "jwt" or "insecure-dev".
	Auth       string `json:"auth"`
	ReadClaim  string `json:"read_claim"`
	AdminClaim string `json:"admin_claim"`
	// FollowClaim lists the users a token may read besides its own.
	FollowClaim string `json:"follow_claim"`
	// Backend describes the Redis; shown to admins only.
	Backend   string `json:"backend,omitempty"`
	StartedAt int64  `json:"started_at"`
	// IntervalsMS is the heartbeat interval of each device kind.
	IntervalsMS  map[string]int64 `json:"intervals_ms"`
	IdleAfterMS  int64            `json:"idle_after_ms"`
	PushWindowMS int64            `json:"push_window_ms"`
	LeaveDelayMS int64            `json:"leave_delay_ms"`
	CoalesceMS   int64            `json:"coalesce_ms"`
	Policy       string           `json:"policy"`
	Classes      []ClassInfo      `json:"classes"`
}

// ClassInfo describes one scope class.
type ClassInfo struct {
	Name     string `json:"name"`
	Layout   string `json:"layout"`
	WindowMS int64  `json:"window_ms"`
}

func (s *Server) info(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	out := s.infoResponse()
	// The route needs no token; the internals are for admins only.
	if !p.Admin {
		if q, e := s.auth.authenticate(r, false); e != nil || !q.Admin {
			out.Backend = ""
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// infoResponse states the engine's effective timings. The core applies
// its defaults internally, so they are restated here from Config's
// documentation.
func (s *Server) infoResponse() InfoResponse {
	c := s.cfg.Engine
	or := func(d, def time.Duration) int64 {
		if d == 0 {
			d = def
		}
		if d < 0 {
			d = 0
		}
		return d.Milliseconds()
	}
	out := InfoResponse{Service: "presence", Auth: "jwt", ReadClaim: s.auth.cfg.ReadClaim, AdminClaim: s.auth.cfg.AdminClaim,
		FollowClaim: s.auth.cfg.FollowClaim,
		Backend:     s.cfg.Backend, StartedAt: millis(s.started), IntervalsMS: map[string]int64{},
		IdleAfterMS: or(c.IdleAfter, 5*time.Minute), PushWindowMS: or(c.PushWindow, 10*time.Minute),
		LeaveDelayMS: or(c.LeaveDelay, 15*time.Second), CoalesceMS: or(c.CoalesceWindow, time.Second), Policy: c.Policy.String()}
	if s.cfg.Auth.InsecureDev {
		out.Auth = "insecure-dev"
	}
	for _, k := range []core.Kind{core.KindOther, core.KindWeb, core.KindDesktop, core.KindIOS, core.KindAndroid} {
		def := 30 * time.Second
		if k == core.KindIOS || k == core.KindAndroid {
			def = time.Minute
		}
		out.IntervalsMS[k.String()] = or(c.Intervals[k], def)
	}
	classes := c.Classes
	if classes == nil {
		classes = core.DefaultClasses()
	}
	for name, cl := range classes {
		out.Classes = append(out.Classes, ClassInfo{Name: name, Layout: cl.Layout.String(),
			WindowMS: or(cl.Window, 2*time.Duration(out.IntervalsMS["web"])*time.Millisecond)})
	}
	sort.Slice(out.Classes, func(i, j int) bool { return out.Classes[i].Name < out.Classes[j].Name })
	return out
}
