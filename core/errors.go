package core

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"

	"github.com/presencekit/presence/internal/slot"
)

// Sentinel errors that callers match with errors.Is.
var (
	// ErrInvalid is matched by every *InputError: the call was rejected before
	// any command was sent.
	ErrInvalid = errors.New("presence: invalid input")
	// ErrSessionReplaced means the heartbeat carried a session token that a
	// later login superseded (or that a kick or logout ended); nothing changed.
	ErrSessionReplaced = errors.New("presence: session replaced")
	// ErrNoSession means the device has no live session and the login policy
	// requires an explicit login first; nothing changed.
	ErrNoSession = errors.New("presence: no session")
	// ErrTooManyDevices means a login would exceed Config.MaxDevices; nothing changed.
	ErrTooManyDevices = errors.New("presence: too many devices")
	// ErrClockSkew means a client timestamp was further from the engine's
	// clock than Config.MaxSkew; nothing changed.
	ErrClockSkew = errors.New("presence: client timestamp too far from server time")
	// ErrUnsupported means the scope's layout cannot answer the request
	// (an approx scope cannot list members or forget one).
	ErrUnsupported = errors.New("presence: not supported by this layout")
	// ErrUnavailable is matched by errors that mean Redis could not be
	// reached, did not answer in time, or refused the call for a passing
	// condition (loading, busy script, failover, over maxmemory, too few
	// replicas in sync). Such a
	// call changed nothing and may be retried.
	ErrUnavailable = errors.New("presence: redis unavailable")
	// ErrNoScript is the NOSCRIPT reply to EVALSHA. Adapters return it; the
	// core handles it by sending the script source.
	ErrNoScript = errors.New("presence: NOSCRIPT")
	// ErrReply means a reply did not have the shape a script promises.
	ErrReply = errors.New("presence: unexpected reply")
	// ErrCrossSlot means a call's keys span more than one cluster slot; it is
	// refused before it reaches a driver, and an adapter refuses one too.
	ErrCrossSlot = slot.ErrCrossSlot
	// ErrLayout means the keys under the engine's prefix were written in
	// another key layout (another version of presence): the engine refuses
	// to read or change them rather than misread them. Point it at another
	// Config.Prefix, or remove the old keys.
	ErrLayout = errors.New("presence: keys of another layout version")
)

// layoutTag starts the error a script raises on keys of another layout
// (lua/recordlib.lua's layoutError).
const layoutTag = "PRESENCE_LAYOUT"

// layoutErr wraps a script's layout error so that it matches ErrLayout.
func layoutErr(err error) error {
	if err == nil || errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), layoutTag) {
		return err
	}
	return &wrapErrors{msg: chain(ErrLayout.Error(), err), errs: []error{ErrLayout, err}}
}

// InputError reports a rejected argument. It matches ErrInvalid.
type InputError struct {
	Field  string // the field, such as "Heartbeat.Device" or "Meta[\"x\"]"
	Reason string // what is wrong with it
}

// Error returns "presence: invalid FIELD: REASON".
func (e *InputError) Error() string {
	return "presence: invalid " + e.Field + ": " + e.Reason
}

// Is makes every InputError match ErrInvalid.
func (e *InputError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InputError{Field: field, Reason: sprintf(format, args...)}
}

func replyErr(format string, args ...any) error {
	return &wrapError{msg: ErrReply.Error() + ": " + sprintf(format, args...), err: ErrReply}
}

// StoreError wraps a driver error with what the core was doing. It unwraps to
// the driver error and, where the failure was a connection or timeout
// failure, also matches ErrUnavailable.
type StoreError struct {
	Op          string // the script or command, such as "heartbeat"
	Unavailable bool   // Redis could not be reached or did not answer in time
	Err         error
}

// Error returns "presence: OP: ERR", ERR without a "presence: " of its own.
func (e *StoreError) Error() string { return chain("presence: "+e.Op, e.Err) }

// chain joins a message and the error it wraps with ": ", dropping the
// wrapped error's own "presence: " so that a message names the package once.
func chain(msg string, err error) string {
	return msg + ": " + strings.TrimPrefix(err.Error(), "presence: ")
}

// Unwrap returns the driver error.
func (e *StoreError) Unwrap() error { return e.Err }

// Is matches ErrUnavailable for connection and timeout failures.
func (e *StoreError) Is(target error) bool { return target == ErrUnavailable && e.Unavailable }

// ClassifyError maps a driver error to the core's shapes, for adapters: a
// NOSCRIPT reply becomes ErrNoScript; network failures, timeouts, closed
// connections and the server's LOADING, BUSY, MASTERDOWN, TRYAGAIN,
// CLUSTERDOWN, READONLY, OOM and NOREPLICAS replies match ErrUnavailable; anything else
// is returned as is.
// The original error stays reachable with errors.Unwrap.
func ClassifyError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNoScript) || errors.Is(err, ErrUnavailable) {
		return err
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "NOSCRIPT") || strings.Contains(msg, "NOSCRIPT No matching script") {
		return &wrapErrors{msg: chain(ErrNoScript.Error(), err), errs: []error{ErrNoScript, err}}
	}
	if unavailable(err, msg) {
		return &wrapErrors{msg: chain(ErrUnavailable.Error(), err), errs: []error{ErrUnavailable, err}}
	}
	return err
}

func unavailable(err error, msg string) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || netError(err) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) {
		return true
	}
	for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "OOM", "NOREPLICAS"} {
		if strings.HasPrefix(msg, p+" ") || msg == p {
			return true
		}
	}
	for _, s := range []string{"connection refused", "connection reset", "broken pipe", "use of closed network connection", "i/o timeout", "pool timeout", "connection pool exhausted", "no such host", "unable to connect"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
