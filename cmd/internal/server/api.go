package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
)

// checkID applies the ID rule of docs/design.md §3 (core.CheckID) to a
// request parameter (the core checks the IDs it is handed itself; this is
// for parameters the server uses before calling it).
func checkID(field, id string) *Error {
	var ie *core.InputError
	if err := core.CheckID(field, id); errors.As(err, &ie) {
		return fieldErr(field, "%s", ie.Reason)
	}
	return nil
}

// checkUser applies checkID to a user ID, and the service's own rule: a
// user ID never contains "/". In a class that counts devices
// (Config.DeviceClasses) a member is USER or USER/DEVICE, split at the
// first "/"; a user "alice/x" would be the same member as alice's device
// "x", so the service refuses such IDs wherever it reads one (a token's
// subject, a body's user, a path, a query, a member).
func checkUser(field, id string) *Error {
	if e := checkID(field, id); e != nil {
		return e
	}
	if strings.Contains(id, "/") {
		return fieldErr(field, "a user ID may not contain \"/\", got %q (in scope members \"/\" separates a user from its device)", id)
	}
	return nil
}

func parseKind(field, name string) (core.Kind, *Error) {
	if name == "" {
		return core.KindOther, nil
	}
	k, ok := core.Parse[core.Kind](name)
	if !ok {
		return 0, fieldErr(field, "unknown kind %q (web, desktop, ios, android, other)", name)
	}
	return k, nil
}

// toHeartbeat validates one beat of the request: the user it is for, its
// kind and its time.
func toHeartbeat(p Principal, prefix string, hb HeartbeatRequest) (core.Heartbeat, *Error) {
	user, e := p.actAs(joinField(prefix, "user"), hb.User)
	if e != nil {
		return core.Heartbeat{}, e
	}
	kind, e := parseKind(joinField(prefix, "kind"), hb.Kind)
	if e != nil {
		return core.Heartbeat{}, e
	}
	out := core.Heartbeat{User: user, Device: hb.Device, Kind: kind, Gateway: hb.Gateway, Token: hb.Token,
		Active: hb.Active, Background: hb.Background, Meta: hb.Meta}
	if hb.At < 0 {
		return core.Heartbeat{}, fieldErr(joinField(prefix, "at"), "must be milliseconds since the Unix epoch")
	}
	if hb.At > 0 {
		out.At = time.UnixMilli(hb.At)
	}
	return out, nil
}

// rateLimit spends one token of user's session budget (heartbeats,
// logins, logouts, manual statuses), whoever sends them.
func (s *Server) rateLimit(user string) *Error {
	return s.rateLimited(s.limiter, user, "heartbeats")
}

// heartbeat answers POST /v1/heartbeat and counts the beat by its outcome.
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	e := s.heartbeatOne(w, r, p)
	s.m.beat(e, 1)
	return e
}

func (s *Server) heartbeatOne(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	var req HeartbeatRequest
	if e := decodeJSON(w, r, s.cfg.MaxBody, &req); e != nil {
		return e
	}
	hb, e := toHeartbeat(p, "", req)
	if e != nil {
		return e
	}
	if e := s.rateLimit(hb.User); e != nil {
		return e
	}
	// The engine merges concurrent heartbeats into batch calls itself
	// (group commit, core.Config.GroupCommit): no batcher in front of it.
	ack, err := s.eng.Heartbeat(r.Context(), hb)
	if err != nil {
		return toAPIError(err, "")
	}
	s.users.note(hb.User)
	writeJSON(w, http.StatusOK, HeartbeatResponse{Token: ack.Token, Changes: wireChanges(ack.Changes), Reassert: ack.Reassert})
	return nil
}

// heartbeats answers POST /v1/heartbeats and counts each beat by its
// outcome; a body that cannot be read counts as no beat.
func (s *Server) heartbeats(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	var req HeartbeatsRequest
	if e := decodeJSON(w, r, s.cfg.MaxBatchBody, &req); e != nil {
		return e
	}
	if len(req.Beats) == 0 || len(req.Beats) > core.MaxBatch {
		e := fieldErr("beats", "must hold 1 to %d beats, got %d", core.MaxBatch, len(req.Beats))
		s.m.beat(e, len(req.Beats))
		return e
	}
	acks, e := s.heartbeatBatch(r, p, req.Beats)
	if e != nil {
		s.m.beat(e, len(req.Beats))
		return e
	}
	for _, a := range acks {
		s.m.beat(a.Error, 1)
	}
	writeJSON(w, http.StatusOK, HeartbeatsResponse{Acks: acks})
	return nil
}

// heartbeatBatch applies a batch of beats: one Ack each, or an error that
// refuses them all.
func (s *Server) heartbeatBatch(r *http.Request, p Principal, in []HeartbeatRequest) ([]Ack, *Error) {
	acks := make([]Ack, len(in))
	beats := make([]core.Heartbeat, 0, len(in))
	index := make([]int, 0, len(in))
	now := time.Now()
	for i, b := range in {
		prefix := "beats[" + strconv.Itoa(i) + "]"
		hb, e := toHeartbeat(p, prefix, b)
		if e != nil && e.Code == CodeForbidden {
			return nil, e // the whole batch is refused: the caller overstepped
		}
		if e != nil {
			acks[i].Error = e
			continue
		}
		if ok, wait := s.limiter.allow(hb.User, now); !ok {
			s.m.rateLimited.WithLabelValues(s.limiter.name).Inc()
			acks[i].Error = apiErr(http.StatusTooManyRequests, CodeRateLimited, "too many heartbeats for %q", hb.User)
			acks[i].Error.RetryAfter = retryAfterSeconds(wait)
			continue
		}
		beats = append(beats, hb)
		index = append(index, i)
	}
	if len(beats) > 0 {
		res, err := s.eng.HeartbeatBatch(r.Context(), beats)
		if err != nil {
			return nil, toAPIError(err, "")
		}
		for j, a := range res {
			i := index[j]
			if a.Err != nil {
				acks[i].Error = toAPIError(a.Err, "beats["+strconv.Itoa(i)+"]")
				continue
			}
			acks[i].Token = a.Token
			acks[i].Changes = wireChanges(a.Changes)
			acks[i].Reassert = a.Reassert
			s.users.note(beats[j].User)
		}
	}
	return acks, nil
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	var req LoginRequest
	if e := decodeJSON(w, r, s.cfg.MaxBody, &req); e != nil {
		return e
	}
	user, e := p.actAs("user", req.User)
	if e != nil {
		return e
	}
	kind, e := parseKind("kind", req.Kind)
	if e != nil {
		return e
	}
	l := core.Login{User: user, Device: req.Device, Kind: kind, Gateway: req.Gateway, Background: req.Background, Meta: req.Meta}
	if req.Policy != "" {
		pol, ok := core.Parse[core.Policy](req.Policy)
		if !ok {
			return fieldErr("policy", "unknown policy %q (multi, exclusive, exclusive-per-kind)", req.Policy)
		}
		l.Policy = &pol
	}
	if e := s.rateLimit(user); e != nil {
		return e
	}
	res, err := s.eng.Login(r.Context(), l)
	if err != nil {
		return toAPIError(err, "")
	}
	s.users.note(user)
	kicked := make([]Kick, 0, len(res.Kicked))
	for _, k := range res.Kicked {
		kicked = append(kicked, wireKick(k, ""))
	}
	writeJSON(w, http.StatusOK, LoginResponse{Token: res.Token, Kicked: kicked, Changes: wireChanges(res.Changes)})
	return nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	return s.end(w, r, p, s.eng.Logout)
}

func (s *Server) disconnect(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	return s.end(w, r, p, s.eng.Disconnect)
}

func (s *Server) end(w http.ResponseWriter, r *http.Request, p Principal,
	op func(ctx context.Context, user, device, token string) (core.Ended, error)) *Error {
	var req LogoutRequest
	if e := decodeJSON(w, r, s.cfg.MaxBody, &req); e != nil {
		return e
	}
	user, e := p.actAs("user", req.User)
	if e != nil {
		return e
	}
	if e := s.rateLimit(user); e != nil {
		return e
	}
	res, err := op(r.Context(), user, req.Device, req.Token)
	if err != nil {
		return toAPIError(err, "")
	}
	writeJSON(w, http.StatusOK, LogoutResponse{Removed: res.Removed, Changes: wireChanges(res.Changes)})
	return nil
}

// maxManualTTL is the longest manual status expiry: longer ones would
// overflow a time.Duration in milliseconds, and 0 means "until cleared".
const maxManualTTL = 366 * 24 * time.Hour

func (s *Server) manual(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	var req ManualRequest
	if e := decodeJSON(w, r, s.cfg.MaxBody, &req); e != nil {
		return e
	}
	user, e := p.actAs("user", r.PathValue("user"))
	if e != nil {
		return e
	}
	m, ok := core.Parse[core.Manual](req.Status)
	if !ok {
		return fieldErr("status", "unknown manual status %q (NONE, DND, INVISIBLE)", req.Status)
	}
	if req.TTLMillis < 0 || req.TTLMillis > maxManualTTL.Milliseconds() {
		return fieldErr("ttl_ms", "must be 0 (until cleared) or 1 to %d (%v), got %d", maxManualTTL.Milliseconds(), maxManualTTL, req.TTLMillis)
	}
	if e := s.rateLimit(user); e != nil {
		return e
	}
	changes, err := s.eng.SetManual(r.Context(), user, m, time.Duration(req.TTLMillis)*time.Millisecond)
	if err != nil {
		return toAPIError(err, "")
	}
	writeJSON(w, http.StatusOK, ChangesResponse{Changes: wireChanges(changes)})
	return nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	user := r.PathValue("user")
	if e := checkUser("user", user); e != nil {
		return e
	}
	if !p.canRead(user) {
		return s.auth.readRefused("")
	}
	if e := s.limitCaller(s.readLim, p, r, "reads"); e != nil {
		return e
	}
	st, err := s.eng.Status(r.Context(), user)
	if err != nil {
		return toAPIError(err, "")
	}
	if st.Status != core.StatusOffline {
		s.users.note(user)
	}
	writeJSON(w, http.StatusOK, wireStatus(st, p.fullView(user)))
	return nil
}

func (s *Server) statuses(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	var req StatusesRequest
	if e := decodeJSON(w, r, s.cfg.MaxBatchBody, &req); e != nil {
		return e
	}
	if len(req.Users) == 0 || len(req.Users) > core.MaxBatch {
		return fieldErr("users", "must hold 1 to %d users, got %d", core.MaxBatch, len(req.Users))
	}
	for i, u := range req.Users {
		if e := checkUser("users["+strconv.Itoa(i)+"]", u); e != nil {
			return e
		}
		if !p.canRead(u) {
			return s.auth.readRefused("users[" + strconv.Itoa(i) + "]: ")
		}
	}
	if e := s.limitCaller(s.readLim, p, r, "reads"); e != nil {
		return e
	}
	sts, err := s.eng.Statuses(r.Context(), req.Users)
	if err != nil {
		return toAPIError(err, "")
	}
	out := StatusesResponse{Statuses: make([]UserStatus, len(sts))}
	for i, st := range sts {
		out.Statuses[i] = wireStatus(st, p.fullView(st.User))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// scopeFor reads the scope from the path and checks that the caller may
// use its class (Config.ClassClaims).
func (s *Server) scopeFor(r *http.Request, p Principal) (core.Scope, *Error) {
	sc, e := scopeOf(r)
	if e != nil {
		return sc, e
	}
	if claim, ok := s.cfg.ClassClaims[sc.Class]; ok && !p.granted(claim) {
		return sc, forbidden("scopes of class %q need a token with the %q claim", sc.Class, claim)
	}
	return sc, nil
}

// scopeOf reads the scope from the path.
func scopeOf(r *http.Request) (core.Scope, *Error) {
	sc := core.Scope{Class: r.PathValue("class"), ID: r.PathValue("id")}
	if e := checkID("class", sc.Class); e != nil {
		return sc, e
	}
	if e := checkID("id", sc.ID); e != nil {
		return sc, e
	}
	return sc, nil
}

// memberFor returns the member a touch or leave is for. A user counts as
// itself only: its user ID exactly, or, in a class that counts devices
// (Config.DeviceClasses), "USER/DEVICE" for one of its live devices. A
// token with the admin or service claim may name any member. Either way a
// member names a user (checkUser: no "/"), or in a class that counts
// devices a user and, after the first "/", one of its devices.
func (s *Server) memberFor(ctx context.Context, p Principal, sc core.Scope, given string) (string, *Error) {
	if given == "" {
		return p.actAs("member", "")
	}
	devices := s.deviceClasses[sc.Class]
	user, device, hasDevice := given, "", false
	if devices {
		user, device, hasDevice = strings.Cut(given, "/")
	}
	if e := checkUser("member", user); e != nil {
		return "", e
	}
	if hasDevice && device == "" {
		return "", fieldErr("member", "%q names no device after the \"/\"", given)
	}
	switch {
	case p.Admin, p.Service, given == p.User:
		return given, nil
	case p.User == "" || user != p.User || !hasDevice:
		if devices {
			return "", forbidden("a token for %q can touch only %q or %q for one of its live devices", p.User, p.User, p.User+"/DEVICE")
		}
		return "", forbidden("a token for %q can touch only %q: class %q counts users", p.User, p.User, sc.Class)
	}
	st, err := s.eng.Status(ctx, p.User)
	if err != nil {
		return "", toAPIError(err, "")
	}
	for _, d := range st.Devices {
		if d.ID == device {
			return given, nil
		}
	}
	return "", forbidden("%q has no live device %q: log it in (or heartbeat) first", p.User, device)
}

func (s *Server) touch(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	return s.scopeMember(w, r, p, true)
}

func (s *Server) leave(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	return s.scopeMember(w, r, p, false)
}

func (s *Server) scopeMember(w http.ResponseWriter, r *http.Request, p Principal, touch bool) *Error {
	sc, e := s.scopeFor(r, p)
	if e != nil {
		return e
	}
	var req MemberRequest
	if r.ContentLength != 0 {
		if e := decodeJSON(w, r, s.cfg.MaxBody, &req); e != nil {
			return e
		}
	}
	if e := s.limitCaller(s.scopeLim, p, r, "touches and leaves"); e != nil {
		return e
	}
	member, e := s.memberFor(r.Context(), p, sc, req.Member)
	if e != nil {
		return e
	}
	if touch {
		if err := s.eng.Touch(r.Context(), sc, member); err != nil {
			return toAPIError(err, "")
		}
		s.scopes.note(sc, time.Now())
		writeJSON(w, http.StatusOK, TouchResponse{Scope: sc.String(), Member: member})
		return nil
	}
	removed, err := s.eng.Leave(r.Context(), sc, member)
	if err != nil {
		return toAPIError(err, "")
	}
	writeJSON(w, http.StatusOK, LeaveResponse{Scope: sc.String(), Member: member, Removed: removed})
	return nil
}

func (s *Server) count(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	sc, e := s.scopeFor(r, p)
	if e != nil {
		return e
	}
	if e := s.limitCaller(s.readLim, p, r, "reads"); e != nil {
		return e
	}
	c, err := s.eng.Count(r.Context(), sc)
	if err != nil {
		return toAPIError(err, "")
	}
	s.scopes.setCount(sc, c)
	writeJSON(w, http.StatusOK, CountResponse{Scope: sc.String(), Count: c.N, AsOf: millis(c.AsOf), Stale: c.Stale})
	return nil
}

func (s *Server) members(w http.ResponseWriter, r *http.Request, p Principal) *Error {
	sc, e := s.scopeFor(r, p)
	if e != nil {
		return e
	}
	if !p.Read {
		return forbidden("listing a scope's members needs the %q claim", s.auth.cfg.ReadClaim)
	}
	if e := s.limitCaller(s.readLim, p, r, "reads"); e != nil {
		return e
	}
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > core.MaxPage {
			return fieldErr("limit", "must be 1 to %d, got %q", core.MaxPage, v)
		}
		limit = n
	}
	page, err := s.eng.Members(r.Context(), sc, q.Get("cursor"), limit)
	if err != nil {
		return toAPIError(err, "")
	}
	out := MembersResponse{Scope: sc.String(), Members: make([]Member, 0, len(page.Members)), Next: page.Next}
	for _, m := range page.Members {
		out.Members = append(out.Members, Member{ID: m.ID, LastSeen: millis(m.LastSeen)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) sweeper(w http.ResponseWriter, _ *http.Request, _ Principal) *Error {
	writeJSON(w, http.StatusOK, s.sweeps.snapshot())
	return nil
}

// OverviewResponse is the body of GET /v1/admin/overview, the dashboard's
// data: known users by status, the hottest scopes this instance knows,
// the sweeper's reports and the open streams.
type OverviewResponse struct {
	Users   UsersOverview   `json:"users"`
	Scopes  []ScopeCount    `json:"scopes"`
	Sweeper SweeperResponse `json:"sweeper"`
	Streams int64           `json:"streams"`
	// Redis says whether this instance reaches Redis; while it does not,
	// the figures above are as they were before the outage.
	Redis RedisHealth `json:"redis"`
}

func (s *Server) overview(w http.ResponseWriter, _ *http.Request, _ Principal) *Error {
	writeJSON(w, http.StatusOK, OverviewResponse{Users: s.users.overview(50), Scopes: s.scopes.top(20),
		Sweeper: s.sweeps.snapshot(), Streams: s.nstreams.Load(), Redis: s.hub.health.snapshot(time.Now())})
	return nil
}
