package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/presencekit/presence/core"
)

// Error codes of the JSON API. They are stable: clients may match them. Each
// comes with one HTTP status, listed beside it.
const (
	CodeInvalidJSON          = "invalid_json"           // 400: the body is not the JSON the endpoint takes
	CodeInvalidField         = "invalid_field"          // 400: a field or parameter failed validation; Field names it
	CodeClockSkew            = "clock_skew"             // 400: "at" is too far from the server's clock
	CodeUnsupported          = "unsupported"            // 400: the scope's layout cannot answer (approx scopes do not list or forget)
	CodeUnauthenticated      = "unauthenticated"        // 401: no token, or a token that does not verify
	CodeForbidden            = "forbidden"              // 403: the token does not allow this
	CodeNotFound             = "not_found"              // 404: no such endpoint
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeSessionReplaced      = "session_replaced"       // 409: the session token was superseded by a later login, a kick or a logout
	CodeNoSession            = "no_session"             // 409: the device must log in first (exclusive policies)
	CodeTooManyDevices       = "too_many_devices"       // 409: the login would exceed the device cap
	CodeBodyTimeout          = "body_timeout"           // 408: the body did not arrive within the read timeout
	CodeBodyTooLarge         = "body_too_large"         // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a state-changing request whose Content-Type is not application/json
	CodeRateLimited          = "rate_limited"           // 429: the caller's budget for this kind of request is spent; see Retry-After
	CodeTooManyStreams       = "too_many_streams"       // 429: the caller (or the instance) holds the most event streams allowed; see Retry-After
	CodeInternal             = "internal"               // 500
	CodeUnavailable          = "unavailable"            // 503: Redis cannot be reached; retry
	CodeShuttingDown         = "shutting_down"          // 503: the instance is draining; retry on another
	CodeTimeout              = "timeout"                // 504: the request ran out of time
)

// Error is an API error: what the server sends as
// {"error":{"code":…,"message":…,"field":…}} with HTTP status Status.
// Clients of the API can decode a response into ErrorResponse.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request field or parameter at fault, for
	// invalid_field, invalid_json and clock_skew.
	Field string `json:"field,omitempty"`
	// RetryAfter is the seconds to wait, for rate_limited, too_many_streams
	// and the 503s (also sent as the Retry-After header).
	RetryAfter int `json:"retry_after,omitempty"`

	cause error // logged, not sent
}

// Unwrap returns the engine error behind an internal or unavailable error.
func (e *Error) Unwrap() error { return e.cause }

// Error returns "server: CODE: MESSAGE".
func (e *Error) Error() string { return "server: " + e.Code + ": " + e.Message }

// ErrorResponse is the body of every error response.
type ErrorResponse struct {
	Error *Error `json:"error"`
}

func apiErr(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// fieldErr is a 400 invalid_field naming field.
func fieldErr(field, format string, args ...any) *Error {
	e := apiErr(http.StatusBadRequest, CodeInvalidField, "%s: %s", field, fmt.Sprintf(format, args...))
	e.Field = field
	return e
}

func forbidden(format string, args ...any) *Error {
	return apiErr(http.StatusForbidden, CodeForbidden, format, args...)
}

// toAPIError maps an error from the engine (or the request's context) to an
// API error. prefix is the JSON path of the request element the call was
// about ("" for the request itself, "beats[3]" within a batch), used to
// name the field of an input error.
func toAPIError(err error, prefix string) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var ie *core.InputError
	switch {
	case errors.As(err, &ie):
		f := jsonField(prefix, ie.Field)
		e := apiErr(http.StatusBadRequest, CodeInvalidField, "%s: %s", f, ie.Reason)
		e.Field = f
		return e
	case errors.Is(err, core.ErrSessionReplaced):
		return apiErr(http.StatusConflict, CodeSessionReplaced, "the session token was replaced by a later login, a kick or a logout; log in again")
	case errors.Is(err, core.ErrNoSession):
		return apiErr(http.StatusConflict, CodeNoSession, "the device has no live session; log in first")
	case errors.Is(err, core.ErrTooManyDevices):
		return apiErr(http.StatusConflict, CodeTooManyDevices, "the user has the most devices allowed")
	case errors.Is(err, core.ErrClockSkew):
		e := apiErr(http.StatusBadRequest, CodeClockSkew, "the client timestamp is too far from the server's clock")
		e.Field = joinField(prefix, "at")
		return e
	case errors.Is(err, core.ErrUnsupported):
		return apiErr(http.StatusBadRequest, CodeUnsupported, "the scope's layout does not support this")
	case errors.Is(err, context.DeadlineExceeded):
		return apiErr(http.StatusGatewayTimeout, CodeTimeout, "the request ran out of time")
	case errors.Is(err, core.ErrUnavailable):
		e := apiErr(http.StatusServiceUnavailable, CodeUnavailable, "redis is unavailable; retry")
		e.cause = err
		return e
	}
	e := apiErr(http.StatusInternalServerError, CodeInternal, "internal error")
	e.cause = err
	return e
}

// jsonField turns a core field name ("Heartbeat.Device", "users[3]",
// "touches[0].Member", "Heartbeat.Meta[k]") into the request's JSON path
// ("device", "users[3]", "member", "meta[k]") under prefix.
func jsonField(prefix, coreField string) string {
	f := coreField
	for _, p := range []string{"Heartbeat.", "Login."} {
		f = strings.TrimPrefix(f, p)
	}
	if strings.HasPrefix(f, "touches[") {
		if j := strings.Index(f, "]."); j >= 0 {
			f = f[j+2:]
		}
	}
	if i := strings.LastIndex(f, "."); i >= 0 && !strings.Contains(f[:i], "[") {
		f = f[i+1:]
	}
	switch {
	case f == "ID":
		f = "id"
	case f != "" && f[0] >= 'A' && f[0] <= 'Z':
		f = strings.ToLower(f[:1]) + f[1:]
	}
	return joinField(prefix, f)
}

func joinField(prefix, f string) string {
	switch {
	case prefix == "":
		return f
	case f == "":
		return prefix
	}
	return prefix + "." + f
}

// writeError sends e as JSON.
func writeError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusServiceUnavailable && e.RetryAfter == 0 {
		c := *e
		c.RetryAfter = 1
		e = &c
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	writeJSON(w, e.Status, ErrorResponse{Error: e})
}

// writeJSON sends v as the JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
