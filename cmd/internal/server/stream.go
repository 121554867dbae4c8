package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/presencekit/presence/core"
)

// maxGateways caps the gateways one stream asks kicks for.
const maxGateways = 64

// streamRequest is what a client asks of an event stream.
type streamRequest struct {
	f        filter
	users    []string
	gateways []string
	lastID   string
	snapshot bool
}

// parseStream reads the stream parameters:
//
//	user=ID (repeatable)  the users whose changes to send; default the caller
//	all=1                 every user's changes (read claim)
//	gateway=ID (repeat.)  kicks addressed to these gateways (admin)
//	sweeps=1              this instance's sweep reports (admin)
//	last_event_id=ID      resume after this change (or the Last-Event-ID header)
//	snapshot=0            no initial statuses of the asked users
func (s *Server) parseStream(r *http.Request, p Principal) (streamRequest, *Error) {
	q := r.URL.Query()
	req := streamRequest{f: filter{users: map[string]bool{}}, snapshot: q.Get("snapshot") != "0"}
	for i, u := range q["user"] {
		field := "user[" + strconv.Itoa(i) + "]"
		if e := checkUser(field, u); e != nil {
			return req, e
		}
		if !p.canRead(u) {
			return req, s.auth.readRefused(field + ": ")
		}
		if !req.f.users[u] {
			req.f.users[u] = true
			req.users = append(req.users, u)
		}
	}
	if len(req.users) > core.MaxBatch {
		return req, fieldErr("user", "at most %d users per stream, got %d", core.MaxBatch, len(req.users))
	}
	var e *Error
	if req.f.all, e = boolParam(q, "all"); e != nil {
		return req, e
	}
	if req.f.all && !p.Read {
		return req, forbidden("all=1 needs the %q claim", s.auth.cfg.ReadClaim)
	}
	if req.f.sweeps, e = boolParam(q, "sweeps"); e != nil {
		return req, e
	}
	req.gateways = q["gateway"]
	if (req.f.sweeps || len(req.gateways) > 0) && !p.Admin {
		return req, forbidden("gateway kicks and sweeps need the %q claim", s.auth.cfg.AdminClaim)
	}
	if len(req.gateways) > maxGateways {
		return req, fieldErr("gateway", "at most %d gateways per stream", maxGateways)
	}
	for i, gw := range req.gateways {
		if e := checkID("gateway["+strconv.Itoa(i)+"]", gw); e != nil {
			return req, e
		}
		if req.f.gateways == nil {
			req.f.gateways = map[string]bool{}
		}
		req.f.gateways[gw] = true
	}
	if len(req.users) == 0 && !req.f.all && !req.f.sweeps && len(req.gateways) == 0 {
		if p.User == "" {
			return req, fieldErr("user", "ask for at least one of user, all, gateway or sweeps")
		}
		req.users = []string{p.User}
		req.f.users[p.User] = true
	}
	field, id := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if v := q.Get("last_event_id"); v != "" {
		field, id = "last_event_id", v
	}
	if id != "" {
		ms, _, ok := parseStreamID(id)
		if !ok {
			return req, fieldErr(field, "%q is not an event ID this service sent", id)
		}
		if ms > uint64(time.Now().Add(5*time.Minute).UnixMilli()) {
			return req, fieldErr(field, "%q is in the future", id)
		}
		req.lastID = id
	}
	return req, nil
}

func boolParam(q url.Values, name string) (bool, *Error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fieldErr(name, "must be 1 or 0, got %q", v)
	}
	return b, nil
}

// sink writes events to one client.
type sink interface {
	send(ev event) error
	ping() error
}

// stream is one open event stream: its hub subscription, which carries
// changes and kicks alike from the change log.
type stream struct {
	s    *Server
	req  streamRequest
	sub  *subscriber
	user string // whose per-user slot it holds; "" for none
}

// openStream subscribes a stream; errors come before anything is written.
// It spends one of the caller's stream opens and takes a slot of the
// caller's and the instance's stream caps.
func (s *Server) openStream(ctx context.Context, r *http.Request, p Principal, req streamRequest) (*stream, *Error) {
	if e := s.limitCaller(s.streamLim, p, r, "event streams opened"); e != nil {
		return nil, e
	}
	wait := time.NewTimer(s.cfg.RequestTimeout)
	defer wait.Stop()
	select {
	case <-s.hub.ready:
	case <-wait.C:
		return nil, apiErr(http.StatusServiceUnavailable, CodeUnavailable, "starting: the change log has not been read yet")
	case <-ctx.Done():
		return nil, toAPIError(ctx.Err(), "")
	}
	st := &stream{s: s, req: req}
	if !p.Admin && !p.Service && p.User != "" {
		st.user = p.User
	}
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if s.draining.Load() {
		return nil, apiErr(http.StatusServiceUnavailable, CodeShuttingDown, "the instance is shutting down; connect to another")
	}
	if s.open >= s.cfg.MaxStreams {
		e := apiErr(http.StatusTooManyRequests, CodeTooManyStreams, "this instance holds the most event streams it allows (%d); retry later or connect to another", s.cfg.MaxStreams)
		e.RetryAfter = 5
		return nil, e
	}
	if st.user != "" && s.userStreams[st.user] >= s.cfg.MaxStreamsPerUser {
		e := apiErr(http.StatusTooManyRequests, CodeTooManyStreams, "%q holds %d event streams, the most allowed; close one first", st.user, s.cfg.MaxStreamsPerUser)
		e.RetryAfter = 5
		return nil, e
	}
	s.open++
	if st.user != "" {
		s.userStreams[st.user]++
	}
	s.streams.Add(1)
	st.sub, _ = s.hub.subscribe(req.f)
	return st, nil
}

// close releases the subscriptions.
func (st *stream) close() {
	s := st.s
	s.hub.unsubscribe(st.sub)
	s.streamsMu.Lock()
	s.open--
	if st.user != "" {
		if s.userStreams[st.user]--; s.userStreams[st.user] <= 0 {
			delete(s.userStreams, st.user)
		}
	}
	s.streamsMu.Unlock()
	s.streams.Done()
}

// run sends the stream: the catch-up from the change log after the
// client's last event ID, the asked users' statuses, "ready", then live
// events until ctx ends, the client lags, or the server drains.
func (st *stream) run(ctx context.Context, sk sink) (reason string, err error) {
	s := st.s
	skipTo, gap := "", false
	if st.req.lastID != "" {
		cursor := st.req.lastID
		var seen core.Repeats // an event delivered again is in the log twice
		for first := true; ; first = false {
			entries, g, err := s.eng.ChangeLogAfter(ctx, cursor, core.MaxPage)
			if err != nil {
				return "unavailable", err
			}
			if g && first {
				gap = true
				if err := sk.send(event{kind: EventReset, data: map[string]string{"reason": "gap"}}); err != nil {
					return "", err
				}
			}
			for _, e := range entries {
				ev := logEvent(e)
				if !seen.Repeat(e.EventID) && st.req.f.wants(ev) {
					if err := sk.send(ev); err != nil {
						return "", err
					}
				}
				cursor = e.ID
			}
			if len(entries) < core.MaxPage {
				break
			}
		}
		skipTo = cursor
	}
	if st.req.snapshot && len(st.req.users) > 0 && (st.req.lastID == "" || gap) {
		sts, err := s.eng.Statuses(ctx, st.req.users)
		if err != nil {
			return "unavailable", err
		}
		p := principalFrom(ctx)
		for _, us := range sts {
			if err := sk.send(event{kind: EventStatus, data: wireStatus(us, p.fullView(us.User))}); err != nil {
				return "", err
			}
		}
	}
	if err := sk.send(event{kind: EventReady, data: map[string]string{"last_event_id": skipTo}}); err != nil {
		return "", err
	}
	ping := time.NewTicker(s.cfg.StreamPing)
	defer ping.Stop()
	deliver := func(ev event) error {
		if ev.id != "" && skipTo != "" && !idLess(skipTo, ev.id) {
			return nil // sent during the catch-up
		}
		return sk.send(ev)
	}
	flush := func() error {
		for {
			select {
			case ev := <-st.sub.ch:
				if err := deliver(ev); err != nil {
					return err
				}
			default:
				return nil
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return "", nil
		case <-s.drain:
			return "shutdown", flush()
		case <-st.sub.lagged:
			return "lagging", flush()
		case ev := <-st.sub.ch:
			if err := deliver(ev); err != nil {
				return "", err
			}
		case <-ping.C:
			if err := sk.ping(); err != nil {
				return "", err
			}
		}
	}
}

// streamStarted and streamEnded keep the count of open streams.
func (s *Server) streamStarted(transport string) {
	s.nstreams.Add(1)
	s.m.streams.WithLabelValues(transport).Inc()
}

func (s *Server) streamEnded(ctx context.Context, transport, reason string, err error) {
	s.nstreams.Add(-1)
	s.m.streams.WithLabelValues(transport).Dec()
	p := principalFrom(ctx)
	s.log.DebugContext(ctx, "presence: stream ended", "transport", transport, "user", p.User, "reason", reason, "err", err)
}

// sse serves GET /v1/events as Server-Sent Events.
func (s *Server) sse(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	req, e := s.parseStream(r, p)
	if e != nil {
		return e
	}
	st, e := s.openStream(r.Context(), r, p, req)
	if e != nil {
		return e
	}
	defer st.close()
	s.streamStarted("sse")
	rc := http.NewResponseController(w)
	// The server's read and write deadlines are for requests; a stream
	// lives on, each write bounded by StreamWriteTimeout, the client's
	// presence checked by the keep-alive pings.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sk := &sseSink{w: w, rc: rc, timeout: s.cfg.StreamWriteTimeout}
	var err error
	if _, err = fmt.Fprint(w, "retry: 2000\n\n"); err == nil {
		err = rc.Flush()
	}
	reason := ""
	if err == nil {
		reason, err = st.run(r.Context(), sk)
		if reason != "" {
			_ = sk.send(event{kind: EventBye, data: map[string]string{"reason": reason}})
		}
	}
	_ = rc.SetWriteDeadline(time.Time{})
	s.streamEnded(r.Context(), "sse", reason, err)
	return nil
}

type sseSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (k *sseSink) send(ev event) error {
	data, err := json.Marshal(ev.data)
	if err != nil {
		return err
	}
	_ = k.rc.SetWriteDeadline(time.Now().Add(k.timeout))
	buf := make([]byte, 0, len(data)+64)
	if ev.id != "" {
		buf = append(append(append(buf, "id: "...), ev.id...), '\n')
	}
	buf = append(append(append(buf, "event: "...), ev.kind...), '\n')
	buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
	if _, err := k.w.Write(buf); err != nil {
		return err
	}
	return k.rc.Flush()
}

func (k *sseSink) ping() error {
	_ = k.rc.SetWriteDeadline(time.Now().Add(k.timeout))
	if _, err := k.w.Write([]byte(": ping\n\n")); err != nil {
		return err
	}
	return k.rc.Flush()
}

// WSMessage is one WebSocket message of GET /v1/ws: the same events as
// the SSE stream, with Type as the SSE event name.
type WSMessage struct {
	Type string          `json:"type"`
	ID   string          `json:"id,omitempty"`
	Data json.RawMessage `json:"data"`
}

// websocket serves GET /v1/ws: the event stream over a WebSocket. Resume
// with the last_event_id parameter.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	req, e := s.parseStream(r, p)
	if e != nil {
		return e
	}
	st, e := s.openStream(r.Context(), r, p, req)
	if e != nil {
		return e
	}
	defer st.close()
	// Accept hijacks the connection, which clears the server's deadlines;
	// each write is then bounded by StreamWriteTimeout, and the pings
	// find dead peers.
	// The Origin was checked by wrap against the host and --cors-origins.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept answered the request
	}
	defer c.CloseNow()
	s.streamStarted("websocket")
	ctx := c.CloseRead(r.Context())
	sk := &wsSink{c: c, ctx: ctx, timeout: s.cfg.StreamWriteTimeout}
	reason, err := st.run(ctx, sk)
	switch reason {
	case "":
		_ = c.Close(websocket.StatusNormalClosure, "")
	case "shutdown":
		_ = sk.send(event{kind: EventBye, data: map[string]string{"reason": reason}})
		_ = c.Close(websocket.StatusGoingAway, reason)
	default:
		_ = sk.send(event{kind: EventBye, data: map[string]string{"reason": reason}})
		_ = c.Close(websocket.StatusTryAgainLater, reason)
	}
	s.streamEnded(r.Context(), "websocket", reason, err)
	return nil
}

type wsSink struct {
	c       *websocket.Conn
	ctx     context.Context
	timeout time.Duration
}

func (k *wsSink) send(ev event) error {
	data, err := json.Marshal(ev.data)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(WSMessage{Type: ev.kind, ID: ev.id, Data: data})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(k.ctx, k.timeout)
	defer cancel()
	return k.c.Write(ctx, websocket.MessageText, msg)
}

func (k *wsSink) ping() error {
	ctx, cancel := context.WithTimeout(k.ctx, k.timeout)
	defer cancel()
	return k.c.Ping(ctx)
}
