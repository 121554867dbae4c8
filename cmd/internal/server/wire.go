package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/presencekit/presence/core"
)

// The JSON shapes of the API. Times are milliseconds since the Unix epoch,
// durations milliseconds; statuses are spelled as core.Status.String
// ("ONLINE", "AWAY", …), kinds as core.Kind.String ("web", "ios", …).

// HeartbeatRequest is the body of POST /v1/heartbeat and one element of
// HeartbeatsRequest.
type HeartbeatRequest struct {
	// User defaults to the token's subject; another user needs an admin token.
	User       string            `json:"user,omitempty"`
	Device     string            `json:"device"`
	Kind       string            `json:"kind,omitempty"` // default "other"
	Gateway    string            `json:"gateway,omitempty"`
	Token      string            `json:"token,omitempty"`
	Active     bool              `json:"active,omitempty"`
	Background bool              `json:"background,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	At         int64             `json:"at,omitempty"`
}

// HeartbeatResponse answers a heartbeat: the session token in force and the
// changes the heartbeat published. Reassert says that Redis lost its data
// and the heartbeat found nothing of its user: a client that set a manual
// status sets it again, with what is left of its expiry (core.Ack.Reassert).
type HeartbeatResponse struct {
	Token    string   `json:"token"`
	Changes  []Change `json:"changes"`
	Reassert bool     `json:"reassert,omitempty"`
}

// LossEvent is the data of a "loss" event on an event stream: Redis lost
// its data at At (ms), and until Until no change is sent, because what
// comes back is the state as it was; a client reloads statuses at Until.
type LossEvent struct {
	At    int64  `json:"at"`
	Until int64  `json:"until"`
	ID    string `json:"id,omitempty"`
}

// HeartbeatsRequest is the body of POST /v1/heartbeats.
type HeartbeatsRequest struct {
	Beats []HeartbeatRequest `json:"beats"`
}

// HeartbeatsResponse answers a batch: one Ack per beat, in order.
type HeartbeatsResponse struct {
	Acks []Ack `json:"acks"`
}

// Ack is the outcome of one beat of a batch: a token, or an error.
type Ack struct {
	Token    string   `json:"token,omitempty"`
	Changes  []Change `json:"changes,omitempty"`
	Reassert bool     `json:"reassert,omitempty"`
	Error    *Error   `json:"error,omitempty"`
}

// LoginRequest is the body of POST /v1/login.
type LoginRequest struct {
	User       string            `json:"user,omitempty"`
	Device     string            `json:"device"`
	Kind       string            `json:"kind,omitempty"`
	Gateway    string            `json:"gateway,omitempty"`
	Background bool              `json:"background,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	// Policy is "multi", "exclusive" or "exclusive-per-kind"; empty: the
	// server's default.
	Policy string `json:"policy,omitempty"`
}

// LoginResponse answers a login: the new session token and the sessions
// the login removed.
type LoginResponse struct {
	Token   string   `json:"token"`
	Kicked  []Kick   `json:"kicked"`
	Changes []Change `json:"changes"`
}

// LogoutRequest is the body of POST /v1/logout and POST /v1/disconnect.
type LogoutRequest struct {
	User   string `json:"user,omitempty"`
	Device string `json:"device"`
	// Token, when given, must be the session's.
	Token string `json:"token,omitempty"`
}

// LogoutResponse reports whether the device had a live session.
type LogoutResponse struct {
	Removed bool     `json:"removed"`
	Changes []Change `json:"changes"`
}

// ManualRequest is the body of PUT /v1/users/{user}/manual.
type ManualRequest struct {
	// Status is "NONE" (clear), "DND" or "INVISIBLE".
	Status string `json:"status"`
	// TTLMillis is how long it holds; 0: until cleared.
	TTLMillis int64 `json:"ttl_ms,omitempty"`
}

// ChangesResponse lists the changes a call published.
type ChangesResponse struct {
	Changes []Change `json:"changes"`
}

// StatusesRequest is the body of POST /v1/statuses.
type StatusesRequest struct {
	Users []string `json:"users"`
}

// StatusesResponse lists statuses in the order asked.
type StatusesResponse struct {
	Statuses []UserStatus `json:"statuses"`
}

// UserStatus is one user's status. Manual, ManualUntil and Devices are
// shown to the user themself and to admins only: an INVISIBLE user is
// OFFLINE to everyone else.
type UserStatus struct {
	User        string   `json:"user"`
	Status      string   `json:"status"`
	Manual      string   `json:"manual,omitempty"`
	ManualUntil int64    `json:"manual_until,omitempty"`
	Devices     []Device `json:"devices,omitempty"`
	At          int64    `json:"at"`
}

// Device is one live device session.
type Device struct {
	ID         string            `json:"id"`
	Kind       string            `json:"kind"`
	Gateway    string            `json:"gateway,omitempty"`
	State      string            `json:"state"`
	Background bool              `json:"background,omitempty"`
	LoginAt    int64             `json:"login_at"`
	LastSeen   int64             `json:"last_seen"`
	LastActive int64             `json:"last_active"`
	Meta       map[string]string `json:"meta,omitempty"`
}

// Change is a published status change, in the JSON the engine publishes
// on its change channel and logs (docs/design.md §7): statuses by name,
// the instant in milliseconds since the epoch.
type Change struct {
	User string `json:"user"`
	From string `json:"from"`
	To   string `json:"to"`
	At   int64  `json:"at"`
	// ID is the change's outbox ID (docs/design.md §7): the same in every
	// delivery of the change, so that a reader drops repeats.
	ID string `json:"id,omitempty"`
}

// Kick is a session removed by a login, addressed to its gateway, in the
// JSON the engine publishes on the gateway's kick channel and logs.
// Gateway is absent for a session that had none.
type Kick struct {
	User    string `json:"user"`
	Device  string `json:"device"`
	Kind    string `json:"kind"`
	Gateway string `json:"gateway,omitempty"`
	At      int64  `json:"at"`
	// ID is the kick's outbox ID, as Change's.
	ID string `json:"id,omitempty"`
}

// wireChange is c's JSON form, with its outbox ID id ("" none).
func wireChange(c core.Change, id string) Change {
	return Change{User: c.User, From: c.From.String(), To: c.To.String(), At: c.At.UnixMilli(), ID: id}
}

// wireKick is k's JSON form, with its outbox ID id ("" none).
func wireKick(k core.Kick, id string) Kick {
	return Kick{User: k.User, Device: k.Device, Kind: k.Kind.String(), Gateway: k.Gateway, At: k.At.UnixMilli(), ID: id}
}

// MemberRequest is the body of touch and leave; Member defaults to the
// token's subject.
type MemberRequest struct {
	Member string `json:"member,omitempty"`
}

// TouchResponse answers a touch.
type TouchResponse struct {
	Scope  string `json:"scope"`
	Member string `json:"member"`
}

// LeaveResponse reports whether the member was in the scope.
type LeaveResponse struct {
	Scope   string `json:"scope"`
	Member  string `json:"member"`
	Removed bool   `json:"removed"`
}

// CountResponse is a scope's member count.
type CountResponse struct {
	Scope string `json:"scope"`
	Count int64  `json:"count"`
	AsOf  int64  `json:"as_of,omitempty"`
	// Stale marks the last good count, served while Redis is unreachable.
	Stale bool `json:"stale,omitempty"`
}

// MembersResponse is one page of a scope's members; Next is the cursor of
// the next page, "" after the last.
type MembersResponse struct {
	Scope   string   `json:"scope"`
	Members []Member `json:"members"`
	Next    string   `json:"next,omitempty"`
}

// Member is one scope member and its last touch.
type Member struct {
	ID       string `json:"id"`
	LastSeen int64  `json:"last_seen"`
}

// SweepReport is one sweep pass of this instance.
type SweepReport struct {
	Kind       string `json:"kind"` // "users" or "scopes"
	At         int64  `json:"at"`   // when the pass ended, by this host's clock
	Buckets    int    `json:"buckets"`
	Held       int    `json:"held"`
	Visited    int    `json:"visited"`
	Removed    int    `json:"removed"`
	Released   int    `json:"released"`
	Changes    int    `json:"changes"`
	Steps      int    `json:"steps"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
}

// SweeperResponse is the body of GET /v1/admin/sweeper: the last pass of
// each kind and the recent passes that did something, newest first.
type SweeperResponse struct {
	Users  *SweepReport  `json:"users"`
	Scopes *SweepReport  `json:"scopes"`
	Recent []SweepReport `json:"recent"`
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func wireChanges(cs []core.Change) []Change {
	out := make([]Change, 0, len(cs))
	for _, c := range cs {
		out = append(out, wireChange(c, ""))
	}
	return out
}

// wireStatus converts a status; full shows the manual status and devices.
func wireStatus(st core.UserStatus, full bool) UserStatus {
	out := UserStatus{User: st.User, Status: st.Status.String(), At: millis(st.At)}
	if !full {
		return out
	}
	out.Manual = st.Manual.String()
	out.ManualUntil = millis(st.ManualUntil)
	for _, d := range st.Devices {
		out.Devices = append(out.Devices, Device{
			ID: d.ID, Kind: d.Kind.String(), Gateway: d.Gateway, State: d.State.String(), Background: d.Background,
			LoginAt: millis(d.LoginAt), LastSeen: millis(d.LastSeen), LastActive: millis(d.LastActive), Meta: d.Meta,
		})
	}
	return out
}

func wireSweep(kind string, r core.SweepReport, err error, at time.Time) SweepReport {
	out := SweepReport{Kind: kind, At: millis(at), Buckets: r.Buckets, Held: r.Held, Visited: r.Visited,
		Removed: r.Removed, Released: r.Released, Changes: len(r.Changes), Steps: r.Steps,
		DurationMS: r.Duration.Milliseconds()}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// decodeJSON reads the request body into v: one JSON value, no unknown
// fields, at most limit bytes.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *Error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		e := apiErr(http.StatusBadRequest, CodeInvalidJSON, "Content-Type must be application/json, got %q", ct)
		e.Field = "Content-Type"
		return e
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		if at, what := badText(raw); at >= 0 {
			return apiErr(http.StatusBadRequest, CodeInvalidJSON, "the body %s at byte %d: JSON text is Unicode in UTF-8 (docs/design.md §3)", what, at)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
		if err != nil {
			return decodeErr(err)
		}
		if dec.More() {
			return apiErr(http.StatusBadRequest, CodeInvalidJSON, "the body holds more than one JSON value")
		}
		if _, terr := dec.Token(); terr != io.EOF {
			return apiErr(http.StatusBadRequest, CodeInvalidJSON, "trailing data after the JSON body")
		}
		return nil
	}
	return decodeErr(err)
}

// decodeErr turns an error of reading or decoding a body into an API error.
func decodeErr(err error) *Error {
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooLarge):
		return apiErr(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", tooLarge.Limit)
	case errors.As(err, &netErr) && netErr.Timeout():
		return apiErr(http.StatusRequestTimeout, CodeBodyTimeout, "the body did not arrive in time")
	case errors.Is(err, io.EOF):
		return apiErr(http.StatusBadRequest, CodeInvalidJSON, "the body is empty; send a JSON object")
	case errors.As(err, &typeErr):
		where := typeErr.Field
		if where == "" {
			where = "the body"
		}
		e := apiErr(http.StatusBadRequest, CodeInvalidJSON, "%s: expected %s, got JSON %s", where, jsonKind(typeErr.Type), typeErr.Value)
		e.Field = typeErr.Field
		return e
	case errors.As(err, &syntaxErr):
		return apiErr(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		e := apiErr(http.StatusBadRequest, CodeInvalidJSON, "unknown field %q", name)
		e.Field = name
		return e
	}
	return apiErr(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON: %v", err)
}

// jsonKind names the JSON a Go type decodes from, so that an error names
// no Go type.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another value"
}

// badText finds what encoding/json would silently replace with U+FFFD, and
// so merge distinct IDs into one (docs/design.md §3): a byte that is not
// UTF-8, or a \u escape of a UTF-16 surrogate that is not half of a pair.
// It returns the byte offset and what is wrong, or -1. Other malformed
// escapes are left to the decoder, which refuses them.
func badText(b []byte) (int, string) {
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			if r, size := utf8.DecodeRune(b[i:]); r != utf8.RuneError || size > 1 {
				i += size
				continue
			}
			return i, "is not valid UTF-8"
		}
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			r, ok := hex4(b, i+2)
			if i+1 >= len(b) || b[i+1] != 'u' || !ok {
				i += 2 // a one-character escape, or malformed: the decoder refuses it
				continue
			}
			if !utf16.IsSurrogate(r) {
				i += 6
				continue
			}
			if lo, ok := hex4(b, i+8); r < 0xdc00 && ok && b[i+6] == '\\' && b[i+7] == 'u' && lo >= 0xdc00 && lo <= 0xdfff {
				i += 12
				continue
			}
			return i, "holds an unpaired surrogate escape " + string(b[i:i+6])
		}
		i++
	}
	return -1, ""
}

// hex4 reads the four hexadecimal digits at b[i:], if there are four.
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
