package abi

import (
	"errors"
	"strconv"

	"github.com/presencekit/presence/core"
)

// Sentinel errors of the ABI itself.
var (
	// ErrMalformed is matched by every *DecodeError: a message that does not
	// follow the format.
	ErrMalformed = errors.New("presence/abi: malformed message")
	// ErrVersion is matched by every *VersionError: a message of an ABI
	// version this side does not speak.
	ErrVersion = errors.New("presence/abi: unsupported ABI version")
	// ErrUnconfigured means an operation reached a module before a
	// successful configure operation.
	ErrUnconfigured = errors.New("presence/abi: engine not configured")
	// ErrInternal means the module failed in a way it could not attribute
	// to its input (a recovered panic); the instance stays usable.
	ErrInternal = errors.New("presence/abi: internal error")
	// ErrUnknownPlan means a resume or cancel named a plan the instance
	// does not have in flight: never started, already ended, cancelled,
	// abandoned (see MaxPlans) or dropped by a new configure.
	ErrUnknownPlan = errors.New("presence/abi: no such plan in flight")
	// ErrResults means a resume carried a number of results other than the
	// number of calls the plan waits for. The plan stays in flight,
	// unchanged: resume it again with the right results, or cancel it.
	ErrResults = errors.New("presence/abi: wrong number of results for the plan's calls")
)

// DecodeError reports a message that does not follow the format. It
// matches ErrMalformed.
type DecodeError struct {
	What   string // the message: "request", "response", or a part of one
	Field  string // where, such as "args.beats[2].kind"; "" for the whole message
	Reason string
}

// Error returns "presence/abi: malformed WHAT: FIELD: REASON".
func (e *DecodeError) Error() string {
	s := "presence/abi: malformed " + e.What
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Reason
}

// Is makes every DecodeError match ErrMalformed.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// VersionError reports a message of another ABI version. It matches
// ErrVersion.
type VersionError struct {
	Got int // the version the message carried (0: none)
}

// Error returns "presence/abi: ABI version N, want 1".
func (e *VersionError) Error() string {
	return "presence/abi: ABI version " + strconv.Itoa(e.Got) + ", want " + strconv.Itoa(Version)
}

// Is makes every VersionError match ErrVersion.
func (e *VersionError) Is(target error) bool { return target == ErrVersion }

// Error codes of [Error]. Each names the sentinel the rebuilt error matches.
const (
	CodeInvalid      = "invalid"          // *core.InputError (core.ErrInvalid)
	CodeReplaced     = "session_replaced" // core.ErrSessionReplaced
	CodeNoSession    = "no_session"       // core.ErrNoSession
	CodeTooMany      = "too_many_devices" // core.ErrTooManyDevices
	CodeClockSkew    = "clock_skew"       // core.ErrClockSkew
	CodeUnsupported  = "unsupported"      // core.ErrUnsupported
	CodeUnavailable  = "unavailable"      // core.ErrUnavailable
	CodeNoScript     = "noscript"         // core.ErrNoScript
	CodeReply        = "reply"            // core.ErrReply
	CodeCrossSlot    = "cross_slot"       // core.ErrCrossSlot
	CodeStore        = "store"            // *core.StoreError (Op, Unavailable, Cause)
	CodeMalformed    = "malformed"        // ErrMalformed
	CodeVersion      = "version"          // ErrVersion
	CodeUnconfigured = "unconfigured"     // ErrUnconfigured
	CodeInternal     = "internal"         // ErrInternal
	CodeUnknownPlan  = "unknown_plan"     // ErrUnknownPlan
	CodeResults      = "results"          // ErrResults
	CodeOther        = "error"            // anything else
)

// sentinels maps codes to the sentinel errors they stand for, in the order
// EncodeError tries them.
var sentinels = []struct {
	code string
	err  error
}{
	{CodeReplaced, core.ErrSessionReplaced},
	{CodeNoSession, core.ErrNoSession},
	{CodeTooMany, core.ErrTooManyDevices},
	{CodeClockSkew, core.ErrClockSkew},
	{CodeUnsupported, core.ErrUnsupported},
	{CodeNoScript, core.ErrNoScript},
	{CodeUnavailable, core.ErrUnavailable},
	{CodeCrossSlot, core.ErrCrossSlot},
	{CodeReply, core.ErrReply},
	{CodeInvalid, core.ErrInvalid},
	{CodeMalformed, ErrMalformed},
	{CodeVersion, ErrVersion},
	{CodeUnconfigured, ErrUnconfigured},
	{CodeInternal, ErrInternal},
	{CodeUnknownPlan, ErrUnknownPlan},
	{CodeResults, ErrResults},
}

func sentinelOf(code string) error {
	for _, s := range sentinels {
		if s.code == code {
			return s.err
		}
	}
	return nil
}

// maxErrorDepth bounds the chain of causes an Error may carry.
const maxErrorDepth = 8

// Error is the wire form of an error. A nil *Error is written as null.
//
//abi:nullable
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field and Reason are those of a *core.InputError (code "invalid").
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Op and Unavailable are those of a *core.StoreError (code "store"),
	// and Cause is its wrapped error.
	Op          string `json:"op,omitempty"`
	Unavailable bool   `json:"unavailable,omitempty"`
	Cause       *Error `json:"cause,omitempty"`
}

// EncodeError returns the wire form of err, or nil for a nil err.
func EncodeError(err error) *Error {
	if err == nil { // here, inlined: a success never calls (and compiles) encodeError
		return nil
	}
	return encodeError(err, 0)
}

func encodeError(err error, depth int) *Error {
	if err == nil {
		return nil
	}
	// Only err itself, not an error it wraps, gives its fields; type
	// assertions rather than errors.As keep reflection out of the module.
	if ie, ok := err.(*core.InputError); ok {
		return &Error{Code: CodeInvalid, Message: err.Error(), Field: ie.Field, Reason: ie.Reason}
	}
	if se, ok := err.(*core.StoreError); ok && depth < maxErrorDepth {
		return &Error{Code: CodeStore, Message: err.Error(), Op: se.Op, Unavailable: se.Unavailable,
			Cause: encodeError(se.Err, depth+1)}
	}
	if re, ok := err.(*RemoteError); ok {
		return &Error{Code: re.Code, Message: re.Message}
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return &Error{Code: s.code, Message: err.Error()}
		}
	}
	return &Error{Code: CodeOther, Message: err.Error()}
}

// Err rebuilds a Go error from e: a *core.InputError for code "invalid", a
// *core.StoreError for code "store", the sentinel itself when the message
// is the sentinel's, and otherwise a *RemoteError that matches the code's
// sentinel. The rebuilt error's message is e.Message. A nil e gives nil.
func (e *Error) Err() error {
	return e.err(0)
}

func (e *Error) err(depth int) error {
	if e == nil {
		return nil
	}
	switch e.Code {
	case CodeInvalid:
		if ie := (&core.InputError{Field: e.Field, Reason: e.Reason}); ie.Error() == e.Message {
			return ie
		}
	case CodeStore:
		if e.Cause != nil && depth < maxErrorDepth {
			se := &core.StoreError{Op: e.Op, Unavailable: e.Unavailable, Err: e.Cause.err(depth + 1)}
			if se.Error() == e.Message {
				return se
			}
		}
	}
	if s := sentinelOf(e.Code); s != nil && s.Error() == e.Message {
		return s
	}
	return &RemoteError{Code: e.Code, Message: e.Message}
}

// RemoteError is an error that crossed the boundary and is not one of the
// shapes Error.Err rebuilds exactly. It matches the sentinel of its code,
// and, for code "store" with Unavailable set, core.ErrUnavailable.
type RemoteError struct {
	Code    string
	Message string
}

// Error returns the message the other side gave.
func (e *RemoteError) Error() string { return e.Message }

// Is matches the sentinel of the error's code.
func (e *RemoteError) Is(target error) bool {
	s := sentinelOf(e.Code)
	return s != nil && s == target
}
