package server

import (
	"context"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// parseOrigins checks the CORS allowlist: each entry a scheme, a host and
// an optional port, as browsers send them in Origin.
func parseOrigins(list []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, o := range list {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return nil, fmt.Errorf("server: CORS origin %q: want scheme://host[:port], such as https://app.example.com", o)
		}
		out[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return out, nil
}

// originAllowed reports whether a request's Origin may call: no Origin
// (not a browser, or a same-origin GET), its own host, or a listed origin.
// listed tells whether the origin is a cross-origin one of the allowlist,
// which gets CORS headers.
func (s *Server) originAllowed(r *http.Request) (ok, listed bool) {
	o := r.Header.Get("Origin")
	if o == "" {
		return true, false
	}
	lo := strings.ToLower(o)
	if s.origins[lo] {
		return true, true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false, false
	}
	return strings.EqualFold(u.Host, r.Host), false
}

// corsHeaders marks an answer readable by the allowed origin o.
func corsHeaders(h http.Header, o string) {
	h.Set("Access-Control-Allow-Origin", o)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Retry-After, X-Presence-Insecure")
}

// preflight answers a CORS preflight (OPTIONS with
// Access-Control-Request-Method) for a route taking method.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request, method string) *Error {
	ok, listed := s.originAllowed(r)
	o := r.Header.Get("Origin")
	if !ok || o == "" {
		return forbidden("origin %q may not call this service (see --cors-origins)", o)
	}
	want := r.Header.Get("Access-Control-Request-Method")
	if method != "" && want != method && !(method == http.MethodGet && want == http.MethodHead) {
		w.Header().Set("Allow", method)
		return apiErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s takes %s, not %s", r.URL.Path, method, want)
	}
	h := w.Header()
	if listed {
		corsHeaders(h, o)
	}
	if method == "" {
		method = "GET, HEAD"
	}
	h.Set("Access-Control-Allow-Methods", method)
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
	h.Set("Access-Control-Max-Age", "600")
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// writes reports whether method changes state.
func writes(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// checkContentType refuses a state-changing request whose body is not
// declared JSON: browsers send only form and text types across origins
// without a preflight, so this keeps other sites' pages from writing.
func checkContentType(r *http.Request) *Error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		return nil
	}
	e := apiErr(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
		"Content-Type must be application/json, got %q", ct)
	e.Field = "Content-Type"
	return e
}

// parseProxies reads the trusted proxies: CIDRs or single addresses.
func parseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range list {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if !strings.Contains(v, "/") {
			a, err := netip.ParseAddr(v)
			if err != nil {
				return nil, fmt.Errorf("server: trusted proxy %q: want a CIDR or an address", v)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("server: trusted proxy %q: want a CIDR or an address", v)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (s *Server) trustedProxy(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP is the address a request came from, for the per-address budget
// and the access log: the peer, or, when the peer is a trusted proxy, the
// rightmost X-Forwarded-For address that is not one (addresses further
// left were written by the client, and could be anything).
func (s *Server) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || len(s.proxies) == 0 || !s.trustedProxy(peer) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return host // a malformed hop: trust nothing further
		}
		if !s.trustedProxy(a) {
			return a.Unmap().String()
		}
	}
	return host
}

// rateLimited is the 429 of a spent budget.
func (s *Server) rateLimited(l *limiter, key, what string) *Error {
	ok, wait := l.allow(key, time.Now())
	if ok {
		return nil
	}
	s.m.rateLimited.WithLabelValues(l.name).Inc()
	e := apiErr(http.StatusTooManyRequests, CodeRateLimited, "too many %s for %q; retry later", what, key)
	e.RetryAfter = retryAfterSeconds(wait)
	return e
}

// limitCaller spends one token of the caller's budget l: by user, and
// not at all for admin and service tokens.
func (s *Server) limitCaller(l *limiter, p Principal, r *http.Request, what string) *Error {
	if p.Admin || p.Service {
		return nil
	}
	key := p.User
	if key == "" {
		key = "ip:" + s.clientIP(r)
	}
	return s.rateLimited(l, key, what)
}

// failureLog keeps repeated request failures (Redis down, say) to one log
// line per interval: the first failure is logged at once, the others are
// counted and reported together when the interval has passed.
type failureLog struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time // when a line was last written
	count   int       // failures since, not yet reported
	lastErr error
	route   string
	code    string
}

// record notes a failed request.
func (f *failureLog) record(ctx context.Context, route, code string, err error) {
	f.mu.Lock()
	now := time.Now()
	if f.last.IsZero() || now.Sub(f.last) >= f.every {
		n := f.count
		f.last, f.count = now, 0
		f.mu.Unlock()
		if n > 0 {
			f.log.WarnContext(ctx, "presence: requests failed", "count", n+1, "interval", f.every, "route", route, "code", code, "err", err)
		} else {
			f.log.WarnContext(ctx, "presence: request failed", "route", route, "code", code, "err", err)
		}
		return
	}
	f.count++
	f.lastErr, f.route, f.code = err, route, code
	f.mu.Unlock()
}

// flush writes the pending count once its interval has passed.
func (f *failureLog) flush(now time.Time) {
	f.mu.Lock()
	if f.count == 0 || now.Sub(f.last) < f.every {
		f.mu.Unlock()
		return
	}
	n, err, route, code := f.count, f.lastErr, f.route, f.code
	f.last, f.count = now, 0
	f.mu.Unlock()
	f.log.Warn("presence: requests failed", "count", n, "interval", f.every, "route", route, "code", code, "err", err)
}

// run flushes the pending counts until ctx ends.
func (f *failureLog) run(ctx context.Context) {
	t := time.NewTicker(max(f.every/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.flush(time.Now().Add(f.every))
			return
		case now := <-t.C:
			f.flush(now)
		}
	}
}

// ThrottledLogger returns a logger that writes each warning or error
// message of l at most once every interval (10 s if every is 0), the next
// one saying how many were suppressed meanwhile; lower levels pass
// untouched. It is what the server applies to the sweeper's and the
// engine's warnings, for a program to apply to its Redis driver's lines,
// which repeat once a dial while Redis is down.
func ThrottledLogger(l *slog.Logger, every time.Duration) *slog.Logger {
	if every == 0 {
		every = 10 * time.Second
	}
	return throttled(l, every)
}

// throttled returns a logger that writes each warning or error message
// at most once an interval; the next one written says how many were
// suppressed meanwhile. Lower levels pass untouched. For the sweeper's
// and the engine's failure lines, which repeat once a pass or a call
// while Redis is down.
func throttled(l *slog.Logger, every time.Duration) *slog.Logger {
	return slog.New(&throttleHandler{next: l.Handler(), every: every,
		st: &throttleState{last: map[string]time.Time{}, dropped: map[string]int{}}})
}

type throttleHandler struct {
	next  slog.Handler
	every time.Duration
	st    *throttleState
}

type throttleState struct {
	mu      sync.Mutex
	last    map[string]time.Time // message → when last written
	dropped map[string]int       // message → suppressed since
}

func (h *throttleHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *throttleHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	now := r.Time
	if now.IsZero() {
		now = time.Now()
	}
	st := h.st
	st.mu.Lock()
	if t, ok := st.last[r.Message]; ok && now.Sub(t) < h.every {
		st.dropped[r.Message]++
		st.mu.Unlock()
		return nil
	}
	if len(st.last) >= 1000 { // messages are constants; this is a safety bound
		clear(st.last)
		clear(st.dropped)
	}
	n := st.dropped[r.Message]
	st.last[r.Message] = now
	delete(st.dropped, r.Message)
	st.mu.Unlock()
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", n), slog.Duration("interval", h.every))
	}
	return h.next.Handle(ctx, r)
}

func (h *throttleHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &throttleHandler{next: h.next.WithAttrs(as), every: h.every, st: h.st}
}

func (h *throttleHandler) WithGroup(name string) slog.Handler {
	return &throttleHandler{next: h.next.WithGroup(name), every: h.every, st: h.st}
}
