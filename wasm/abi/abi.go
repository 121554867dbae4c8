package abi

import (
	"strconv"

	"github.com/presencekit/presence/core"
)

// Version is the ABI version this package speaks. Every message carries
// it as "v"; a message of another version is refused with a
// *VersionError. A change that an existing host or module could misread
// gets a new version.
const Version = 2

// MaxPlans is the most plans one module instance keeps in flight. Starting
// a plan while MaxPlans are in flight abandons the oldest (the one started
// first): it is forgotten, and a resume of it gets an error of code
// "unknown_plan". A host that gives up on a plan sends cancel instead.
const MaxPlans = 256

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
	OpOnline         = "online"           // *Empty → *Online
	OpAck            = "ack"              // *AckArgs → *Empty

	// OpResume hands a plan the results of the calls it waits for; the
	// response is the plan's next step or its end, whose result is that
	// of the op that started the plan.
	OpResume = "resume" // *Resume → the next step, or the result of the plan's op
	// OpCancel forgets a plan in flight.
	OpCancel = "cancel" // *PlanRef → *Empty
)

// Ops returns every operation, in the order of the list above.
func Ops() []string {
	return []string{OpConfigure, OpHeartbeat, OpHeartbeatBatch, OpLogin, OpLogout, OpDisconnect, OpSetManual,
		OpStatus, OpStatuses, OpTouch, OpTouchBatch, OpLeave, OpCount, OpMembers, OpActiveWithin,
		OpSweepUsers, OpSweepScopes, OpChangeLogAfter, OpOnline, OpAck, OpResume, OpCancel}
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
	case OpSweepUsers, OpSweepScopes, OpOnline:
		return new(Empty)
	case OpChangeLogAfter:
		return new(ChangeLogArgs)
	case OpAck:
		return new(AckArgs)
	case OpResume:
		return new(Resume)
	case OpCancel:
		return new(PlanRef)
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
	case OpCancel, OpAck:
		return new(Empty)
	case OpChangeLogAfter:
		return new(ChangeLog)
	case OpOnline:
		return new(Online)
	}
	return nil
}

// Request is one operation for a module:
//
//	{"v":2,"op":"heartbeat","now":1767225600000,"args":{…}}
//	{"v":2,"op":"resume","now":1767225600003,"args":{"plan":7,"results":[…]}}
//
// Now is the host's instant in milliseconds since the epoch; a module
// configured with the host clock requires it on every operation but
// configure. Args is a pointer to the op's argument type (NewArgs).
type Request struct {
	Op   string
	Now  int64
	Args any
}

// EncodeRequest returns the JSON of r. Args must be one of the argument
// types (or nil for none).
func EncodeRequest(r Request) ([]byte, error) {
	w := writer{b: make([]byte, 0, 256)}
	w.open()
	w.int("v", Version)
	w.str("op", r.Op)
	w.intOmit("now", r.Now)
	if r.Args != nil {
		a, ok := r.Args.(wire)
		if !ok {
			return nil, &DecodeError{What: "request", Field: "args", Reason: "not an ABI type"}
		}
		w.key("args")
		w.b = a.appendJSON(w.b)
	}
	w.close()
	return w.b, nil
}

// envelope reads the top-level object of a message: "v" and the keys
// read handles. An unknown key is reported only if the version is
// right, so that a message of another version gets a *VersionError.
func envelope(r *reader, read func(key string) (bool, error)) error {
	v, seenV := 0, false
	var unknown error
	err := r.object(func(key string) error {
		if key == "v" {
			n, err := r.int()
			v, seenV = n, true
			return err
		}
		ok, err := read(key)
		if !ok && err == nil {
			if unknown == nil {
				unknown = r.unknown()
			}
			return r.skip()
		}
		return err
	})
	if err == nil {
		err = r.end()
	}
	if seenV && v != Version || !seenV && err == nil {
		return &VersionError{Got: v}
	}
	if err != nil {
		return err
	}
	return unknown
}

// DecodeRequest reads a request: the envelope, then the arguments of its
// op into the type NewArgs gives (absent or null arguments decode as the
// zero value). It returns a *VersionError for another version and a
// *DecodeError for anything else that does not follow the format.
//
// A request in the compact form (its first byte is Compact) is read as
// such: see EncodeRequestCompact.
func DecodeRequest(b []byte) (Request, error) {
	const what = "request"
	if len(b) > 0 && b[0] == Compact {
		return decodeCompactRequest(b)
	}
	if len(b) > MaxMessage {
		return Request{}, &DecodeError{What: what, Reason: "larger than " + strconv.Itoa(MaxMessage) + " bytes"}
	}
	r := newReader(what, b)
	var req Request
	argsAt, argsEnd := -1, -1
	err := envelope(r, func(key string) (bool, error) {
		var err error
		switch key {
		case "op":
			req.Op, err = r.str()
		case "now":
			req.Now, err = r.int64()
		case "args":
			r.ws()
			argsAt = r.i
			err = r.skip()
			argsEnd = r.i
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return Request{}, err
	}
	// A configure request is read without NewArgs and decodeArgs, and its
	// result written without appendResult: a JavaScript engine compiles a
	// WebAssembly function whole on its first call, configure is an
	// isolate's first request, and those switches over every message type
	// are 20 kB of code it does not need.
	var args any
	if req.Op == OpConfigure {
		args = new(Config)
	} else {
		args = NewArgs(req.Op)
	}
	if args == nil {
		return Request{}, &DecodeError{What: what, Field: "op", Reason: "unknown operation " + truncate(req.Op)}
	}
	if req.Now < 0 {
		return Request{}, &DecodeError{What: what, Field: "now", Reason: "must not be negative"}
	}
	if argsAt >= 0 {
		ar := newReader(what, b[argsAt:argsEnd])
		ar.path = append(ar.path, pathElem{key: "args"})
		if !ar.null() {
			var err error
			if c, ok := args.(*Config); ok {
				err = readConfig(c, ar)
			} else {
				err = decodeArgs(args, ar)
			}
			if err != nil {
				return Request{}, err
			}
		}
	}
	req.Args = args
	return req, nil
}

// readConfig reads configure's arguments. It is not inlined, so that
// DecodeRequest and decodeArgs share one copy of the decoder.
//
//go:noinline
func readConfig(c *Config, r *reader) error { return c.decodeJSON(r) }

// Response is a module's answer to a request: the end of an operation (a
// result, with the messages to publish, or an error), or the script calls
// a plan waits for:
//
//	{"v":2,"result":{…},"messages":[{"kind":"change","channel":"…","payload":"…"}]}
//	{"v":2,"error":{"code":…,"message":…}}
//	{"v":2,"plan":7,"calls":[{"sha":"…","keys":[…],"args":[…]}]}
//
// Result is a pointer to the op's result type (NewResult). Calls is
// non-empty exactly when Plan is set (a positive ID); the host sends them
// (in one pipeline where it can, with other plans' calls if it likes) and
// answers with a resume request of Plan carrying one result per call.
type Response struct {
	Result   any
	Error    *Error
	Messages []Message
	Plan     int64
	Calls    []core.Call
}

// EncodeResponse returns the JSON of r. It does not fail: a result that
// is not one of the result types becomes an error of code "internal".
func EncodeResponse(r Response) []byte {
	return AppendResponse(make([]byte, 0, 256), r)
}

// AppendResponse appends the JSON of r to b (see EncodeResponse).
func AppendResponse(b []byte, r Response) []byte {
	w := writer{b: b}
	w.open()
	w.int("v", Version)
	if r.Plan > 0 && len(r.Calls) > 0 && r.Error == nil && r.Result == nil {
		w.int("plan", r.Plan)
		w.key("calls")
		w.b = Calls(r.Calls).appendJSON(w.b)
		w.close()
		return w.b
	}
	e := r.Error
	if e == nil {
		at := len(w.b)
		w.key("result")
		ok := true
		if c, isConfigured := r.Result.(*Configured); isConfigured {
			w.b = c.appendJSON(w.b) // as DecodeRequest reads configure's arguments
		} else {
			w.b, ok = appendResult(w.b, r.Result)
		}
		if !ok {
			w.b = w.b[:at]
			e = &Error{Code: CodeInternal, Message: "presence/abi: encoding a result: not an ABI type"}
		}
	}
	if e != nil {
		w.key("error")
		w.b = e.appendJSON(w.b)
	} else {
		if len(r.Messages) > 0 {
			w.list("messages", len(r.Messages), false, func(b []byte, i int) []byte { return r.Messages[i].appendJSON(b) })
		}
	}
	w.close()
	return w.b
}

// EncodeErrorResponse returns the JSON of a response carrying err.
func EncodeErrorResponse(err error) []byte {
	return EncodeResponse(Response{Error: EncodeError(err)})
}

// DecodeResponse reads the response to a request of op (for a resume: the
// op that started the plan): the error, the result decoded into the type
// NewResult(op) gives with the messages, or the plan and its calls.
// Exactly one of "result", "error" and "calls" must be there; "plan"
// comes with "calls" and only then, "messages" only with "result". A
// response in the compact form (its first byte is Compact; see
// AppendResponseCompact) is read as such.
func DecodeResponse(op string, b []byte) (Response, error) {
	const what = "response"
	if len(b) > 0 && b[0] == Compact {
		return decodeCompactResponse(op, b)
	}
	if len(b) > MaxMessage {
		return Response{}, &DecodeError{What: what, Reason: "larger than " + strconv.Itoa(MaxMessage) + " bytes"}
	}
	res := NewResult(op)
	if res == nil {
		return Response{}, &DecodeError{What: what, Reason: "unknown operation " + truncate(op)}
	}
	r := newReader(what, b)
	var resp Response
	seenResult, seenMessages, seenCalls, seenPlan := false, false, false, false
	err := envelope(r, func(key string) (bool, error) {
		var err error
		switch key {
		case "result":
			if r.null() {
				return true, nil
			}
			seenResult = true
			err = res.(wirePtr).decodeJSON(r)
		case "error":
			resp.Error, err = r.decodeError()
		case "messages":
			seenMessages = true
			err = r.array(func(i int) error {
				var m Message
				err := m.decodeJSON(r)
				resp.Messages = append(resp.Messages, m)
				return err
			})
		case "plan":
			seenPlan = true
			resp.Plan, err = r.int64()
			if err == nil && resp.Plan <= 0 {
				err = r.fail("must be positive")
			}
		case "calls":
			seenCalls = true
			var cs Calls
			err = cs.decodeJSON(r)
			resp.Calls = cs
			if err == nil && len(cs) == 0 {
				err = r.fail("must not be empty")
			}
		default:
			return false, nil
		}
		return true, err
	})
	n := 0
	for _, seen := range []bool{seenResult, resp.Error != nil, seenCalls} {
		if seen {
			n++
		}
	}
	switch {
	case err != nil:
		return Response{}, err
	case n > 1:
		return Response{}, &DecodeError{What: what, Reason: "has more than one of a result, an error and calls"}
	case n == 0:
		return Response{}, &DecodeError{What: what, Reason: "has neither a result, nor an error, nor calls"}
	case seenCalls != seenPlan:
		return Response{}, &DecodeError{What: what, Field: "plan", Reason: "must come with calls, and only then"}
	case seenMessages && !seenResult:
		return Response{}, &DecodeError{What: what, Field: "messages", Reason: "only with a result"}
	case seenResult:
		resp.Result = res
	}
	return resp, nil
}

func joinField(parent, field string) string {
	if field == "" {
		return parent
	}
	if parent == "" {
		return field
	}
	return parent + "." + field
}
