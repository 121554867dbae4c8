package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
)

// Version is the ABI version this package speaks. Every message carries
// it as "v"; a message of another version is refused with a
// *VersionError. A change that an existing host or module could misread
// gets a new version.
const Version = 1

// MaxMessage is the largest message, in bytes, that the decoders accept.
const MaxMessage = 64 << 20

// Operations a host hands a module. The argument and result types of
// each are listed in ABI.md and returned by NewArgs and NewResult.
const (
	OpConfigure      = "configure"        // *Config → *Configured
	OpHeartbeat      = "heartbeat"        // *Heartbeat → *Ack
	OpHeartbeatBatch = "heartbeat_batch"  // *HeartbeatBatch → *Acks
	OpLogin          = "login"            // *Login → *LoginResult
	OpLogout         = "logout"           // *End → *Ended
	OpDisconnect     = "disconnect"       // *End → *Ended
	OpSetManual      = "set_manual"       // *SetManual → *Changes
	OpStatus         = "status"           // *StatusArgs → *UserStatus
	OpStatuses       = "statuses"         // *StatusesArgs → *Statuses
	OpTouch          = "touch"            // *Touch → *Empty
	OpTouchBatch     = "touch_batch"      // *TouchBatch → *Empty
	OpLeave          = "leave"            // *Touch → *Removed
	OpCount          = "count"            // *ScopeArgs → *Count
	OpMembers        = "members"          // *MembersArgs → *MemberPage
	OpActiveWithin   = "active_within"    // *ActiveWithinArgs → *N
	OpSweepUsers     = "sweep_users"      // *Empty → *SweepReport
	OpSweepScopes    = "sweep_scopes"     // *Empty → *SweepReport
	OpChangeLogAfter = "change_log_after" // *ChangeLogArgs → *ChangeLog
)

// Ops returns every operation, in the order of the list above.
func Ops() []string {
	return []string{OpConfigure, OpHeartbeat, OpHeartbeatBatch, OpLogin, OpLogout, OpDisconnect, OpSetManual,
		OpStatus, OpStatuses, OpTouch, OpTouchBatch, OpLeave, OpCount, OpMembers, OpActiveWithin,
		OpSweepUsers, OpSweepScopes, OpChangeLogAfter}
}

// NewArgs returns a new zero argument of op, or nil for an unknown op.
func NewArgs(op string) any {
	switch op {
	case OpConfigure:
		return new(Config)
	case OpHeartbeat:
		return new(Heartbeat)
	case OpHeartbeatBatch:
		return new(HeartbeatBatch)
	case OpLogin:
		return new(Login)
	case OpLogout, OpDisconnect:
		return new(End)
	case OpSetManual:
		return new(SetManual)
	case OpStatus:
		return new(StatusArgs)
	case OpStatuses:
		return new(StatusesArgs)
	case OpTouch, OpLeave:
		return new(Touch)
	case OpTouchBatch:
		return new(TouchBatch)
	case OpCount:
		return new(ScopeArgs)
	case OpMembers:
		return new(MembersArgs)
	case OpActiveWithin:
		return new(ActiveWithinArgs)
	case OpSweepUsers, OpSweepScopes:
		return new(Empty)
	case OpChangeLogAfter:
		return new(ChangeLogArgs)
	}
	return nil
}

// NewResult returns a new zero result of op, or nil for an unknown op.
func NewResult(op string) any {
	switch op {
	case OpConfigure:
		return new(Configured)
	case OpHeartbeat:
		return new(Ack)
	case OpHeartbeatBatch:
		return new(Acks)
	case OpLogin:
		return new(LoginResult)
	case OpLogout, OpDisconnect:
		return new(Ended)
	case OpSetManual:
		return new(Changes)
	case OpStatus:
		return new(UserStatus)
	case OpStatuses:
		return new(Statuses)
	case OpTouch, OpTouchBatch:
		return new(Empty)
	case OpLeave:
		return new(Removed)
	case OpCount:
		return new(Count)
	case OpMembers:
		return new(MemberPage)
	case OpActiveWithin:
		return new(N)
	case OpSweepUsers, OpSweepScopes:
		return new(SweepReport)
	case OpChangeLogAfter:
		return new(ChangeLog)
	}
	return nil
}

// Request is one operation for a module:
//
//	{"v":1,"op":"heartbeat","now":1767225600000,"args":{…}}
//
// Now is the host's instant in milliseconds since the epoch; a module
// configured with the host clock requires it on every operation but
// configure. Args is a pointer to the op's argument type (NewArgs).
type Request struct {
	Op   string
	Now  int64
	Args any
}

type requestWire struct {
	V    int             `json:"v"`
	Op   string          `json:"op"`
	Now  int64           `json:"now,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
}

// EncodeRequest returns the JSON of r.
func EncodeRequest(r Request) ([]byte, error) {
	w := requestWire{V: Version, Op: r.Op, Now: r.Now}
	if r.Args != nil {
		b, err := json.Marshal(r.Args)
		if err != nil {
			return nil, err
		}
		w.Args = b
	}
	return json.Marshal(w)
}

// DecodeRequest reads a request: the envelope, then the arguments of its
// op into the type NewArgs gives (absent arguments decode as the zero
// value). It returns a *VersionError for another version and a
// *DecodeError for anything else that does not follow the format.
func DecodeRequest(b []byte) (Request, error) {
	const what = "request"
	var w requestWire
	if err := decodeStrict(what, b, &w); err != nil {
		return Request{}, err
	}
	if w.V != Version {
		return Request{}, &VersionError{Got: w.V}
	}
	args := NewArgs(w.Op)
	if args == nil {
		return Request{}, &DecodeError{What: what, Field: "op", Reason: "unknown operation " + truncate(w.Op)}
	}
	if w.Now < 0 {
		return Request{}, &DecodeError{What: what, Field: "now", Reason: "must not be negative"}
	}
	if len(w.Args) > 0 {
		if err := decodeStrict(what, w.Args, args); err != nil {
			var de *DecodeError
			if errors.As(err, &de) {
				de.Field = joinField("args", de.Field)
			}
			return Request{}, err
		}
	}
	return Request{Op: w.Op, Now: w.Now, Args: args}, nil
}

// Response is a module's answer to a request: a result, or an error.
//
//	{"v":1,"result":{…}}   or   {"v":1,"error":{"code":…,"message":…}}
//
// Result is a pointer to the op's result type (NewResult).
type Response struct {
	Result any
	Error  *Error
}

type responseWire struct {
	V      int             `json:"v"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// EncodeResponse returns the JSON of r. It does not fail: a result that
// cannot be encoded becomes an error response of code "internal".
func EncodeResponse(r Response) []byte {
	w := responseWire{V: Version, Error: r.Error}
	if r.Error == nil {
		res, err := json.Marshal(r.Result)
		if err != nil {
			w.Error = &Error{Code: CodeInternal, Message: "presence/abi: encoding a result: " + err.Error()}
		} else {
			w.Result = res
		}
	}
	b, err := json.Marshal(w)
	if err != nil { // only an Error with invalid contents could get here
		b, _ = json.Marshal(responseWire{V: Version, Error: &Error{Code: CodeInternal, Message: "presence/abi: encoding a response"}})
	}
	return b
}

// EncodeErrorResponse returns the JSON of a response carrying err.
func EncodeErrorResponse(err error) []byte {
	return EncodeResponse(Response{Error: EncodeError(err)})
}

// DecodeResponse reads the response to a request of op: the error, or the
// result decoded into the type NewResult(op) gives.
func DecodeResponse(op string, b []byte) (Response, error) {
	const what = "response"
	var w responseWire
	if err := decodeStrict(what, b, &w); err != nil {
		return Response{}, err
	}
	if w.V != Version {
		return Response{}, &VersionError{Got: w.V}
	}
	if w.Error != nil {
		if len(w.Result) > 0 {
			return Response{}, &DecodeError{What: what, Reason: "has both a result and an error"}
		}
		if err := checkError(w.Error, 0); err != nil {
			return Response{}, &DecodeError{What: what, Field: "error", Reason: err.Error()}
		}
		return Response{Error: w.Error}, nil
	}
	res := NewResult(op)
	if res == nil {
		return Response{}, &DecodeError{What: what, Reason: "unknown operation " + truncate(op)}
	}
	if len(w.Result) == 0 || string(w.Result) == "null" {
		return Response{}, &DecodeError{What: what, Reason: "has neither a result nor an error"}
	}
	if err := decodeStrict(what, w.Result, res); err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Field = joinField("result", de.Field)
		}
		return Response{}, err
	}
	if a, ok := res.(*Ack); ok {
		if err := checkError(a.Error, 0); err != nil {
			return Response{}, &DecodeError{What: what, Field: "result.error", Reason: err.Error()}
		}
	}
	if a, ok := res.(*Acks); ok {
		for i := range a.Acks {
			if err := checkError(a.Acks[i].Error, 0); err != nil {
				return Response{}, &DecodeError{What: what, Field: "result.acks[" + strconv.Itoa(i) + "].error", Reason: err.Error()}
			}
		}
	}
	return Response{Result: res}, nil
}

// checkError checks that a received error has a code and a bounded chain
// of causes.
func checkError(e *Error, depth int) error {
	if e == nil {
		return nil
	}
	if e.Code == "" {
		return errors.New("error without a code")
	}
	if depth >= maxErrorDepth {
		return errors.New("error causes nested too deep")
	}
	return checkError(e.Cause, depth+1)
}

// decodeStrict decodes one JSON object into v: no unknown fields, no
// trailing data, no more than MaxMessage bytes.
func decodeStrict(what string, b []byte, v any) error {
	if len(b) > MaxMessage {
		return &DecodeError{What: what, Reason: "larger than " + strconv.Itoa(MaxMessage) + " bytes"}
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return &DecodeError{What: what, Reason: "not a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &DecodeError{What: what, Reason: "trailing data after the object"}
	}
	return nil
}

// jsonError turns an encoding/json error into a *DecodeError.
func jsonError(what string, err error) error {
	var de *DecodeError
	if errors.As(err, &de) {
		return &DecodeError{What: what, Field: de.Field, Reason: de.Reason}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &DecodeError{What: what, Reason: "invalid JSON at byte " + strconv.FormatInt(se.Offset, 10) + ": " + se.Error()}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &DecodeError{What: what, Field: te.Field, Reason: "JSON " + te.Value + " where " + te.Type.String() + " belongs"}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &DecodeError{What: what, Reason: "truncated JSON"}
	}
	return &DecodeError{What: what, Reason: strings.TrimPrefix(err.Error(), "json: ")}
}

func joinField(parent, field string) string {
	if field == "" {
		return parent
	}
	return parent + "." + field
}
