package abi

import (
	"strconv"

	"github.com/presencekit/presence/core"
)

// The compact form carries the messages of the hot path — heartbeat,
// heartbeat_batch and resume requests; responses carrying calls, an Ack or
// Acks — in a binary encoding, next to their JSON. It exists because JSON
// is costly where Go runs as WebAssembly; the messages, their fields and
// the decoders' strictness are the same. See "The compact form" in
// wasm/ABI.md.
//
// A compact message starts with the byte Compact (which no JSON message
// can start with: it is not white space, not '{' and not even the first
// byte of a UTF-8 sequence), then the version (one byte, 2) and a kind
// byte. Its fields follow in declaration order, without names:
//
//	uvarint   LEB128, at most 10 bytes, the shortest encoding
//	varint    the uvarint of the zig-zag encoding of an int64
//	string    uvarint length, then the bytes as they are (any bytes)
//	list      uvarint count, then the items
//	flags     one byte; a bit not defined is an error
//	enum      one byte, the core's number (Kind, Status)
//
// A decoder refuses a truncated message, trailing bytes, a longer varint
// than needed, an unknown kind, tag or flag, counts over the bounds of
// the JSON form, and metadata keys out of order or repeated, with a
// *DecodeError naming the field; another version gets a *VersionError.
const Compact byte = 0xB2

// Kinds of compact messages: the byte after the version.
const (
	compactHeartbeat = 'h' // request: now varint, Heartbeat
	compactBatch     = 'b' // request: now varint, list of Heartbeat
	compactResume    = 'r' // request: now varint, plan varint, list of result
	compactCalls     = 'c' // response: plan varint, list of call
	compactAck       = 'a' // response to heartbeat: Ack, list of Message
	compactAcks      = 'k' // response to heartbeat_batch: list of Ack, list of Message
)

// Flags of a Heartbeat.
const (
	hbActive     = 1 << iota
	hbBackground // background
	hbMeta       // meta follows (absent: null)
	hbAt         // at follows (absent: none)
	hbFlags      = hbActive | hbBackground | hbMeta | hbAt
)

// Flags of an Ack and of an Error.
const (
	ackError    = 1 << iota // error follows
	ackChanges              // changes follow (absent: null)
	ackReassert             // core.Ack.Reassert
	ackFlags    = ackError | ackChanges | ackReassert

	errUnavailable = 1 << 0
	errCause       = 1 << 1 // cause follows
	errFlags       = errUnavailable | errCause
)

// Tags of a call, a result and a value.
const (
	callSHA    = 0 // EVALSHA: sha, keys, args
	callSource = 1 // EVAL: src, keys, args

	resultValue = 0
	resultError = 1

	valueNil    = 0
	valueInt    = 1 // varint
	valueString = 2 // string
	valueArray  = 3 // list of value
)

// HasCompact reports whether requests of op have a compact form
// (heartbeat, heartbeat_batch and resume).
func HasCompact(op string) bool {
	return op == OpHeartbeat || op == OpHeartbeatBatch || op == OpResume
}

// EncodeRequestCompact returns r in the compact form when its op has one
// (HasCompact), and its JSON (EncodeRequest) otherwise. A module answers a
// compact request in the compact form where the response has one (calls,
// an Ack, Acks) and in JSON otherwise (errors, the results of other ops);
// DecodeResponse reads either.
func EncodeRequestCompact(r Request) ([]byte, error) {
	var kind byte
	switch r.Op {
	case OpHeartbeat:
		kind = compactHeartbeat
	case OpHeartbeatBatch:
		kind = compactBatch
	case OpResume:
		kind = compactResume
	default:
		return EncodeRequest(r)
	}
	b := make([]byte, 0, 256)
	b = append(b, Compact, Version, kind)
	b = appendVarint(b, r.Now)
	switch a := r.Args.(type) {
	case *Heartbeat:
		if kind == compactHeartbeat {
			return a.appendCompact(b), nil
		}
	case *HeartbeatBatch:
		if kind == compactBatch {
			b = appendUvarint(b, uint64(len(a.Beats)))
			for i := range a.Beats {
				b = a.Beats[i].appendCompact(b)
			}
			return b, nil
		}
	case *Resume:
		if kind == compactResume {
			b = appendVarint(b, a.Plan)
			b = appendUvarint(b, uint64(len(a.Results)))
			for _, res := range a.Results {
				b = appendCompactResult(b, res)
			}
			return b, nil
		}
	}
	return nil, &DecodeError{What: "request", Field: "args", Reason: "not the argument type of " + r.Op}
}

// AppendResponseCompact appends r to b in the compact form when it has
// one (calls; a result of type *Ack or *Acks), and as JSON
// (AppendResponse) otherwise.
func AppendResponseCompact(b []byte, r Response) []byte {
	if r.Plan > 0 && len(r.Calls) > 0 && r.Error == nil && r.Result == nil {
		b = append(b, Compact, Version, compactCalls)
		b = appendVarint(b, r.Plan)
		b = appendUvarint(b, uint64(len(r.Calls)))
		for i := range r.Calls {
			b = appendCompactCall(b, &r.Calls[i])
		}
		return b
	}
	if r.Error == nil {
		switch res := r.Result.(type) {
		case *Ack:
			b = append(b, Compact, Version, compactAck)
			b = res.appendCompact(b)
			return appendCompactMessages(b, r.Messages)
		case *Acks:
			b = append(b, Compact, Version, compactAcks)
			b = appendUvarint(b, uint64(len(res.Acks)))
			for i := range res.Acks {
				b = res.Acks[i].appendCompact(b)
			}
			return appendCompactMessages(b, r.Messages)
		}
	}
	return AppendResponse(b, r)
}

func appendUvarint(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

func appendVarint(b []byte, x int64) []byte {
	return appendUvarint(b, uint64(x<<1)^uint64(x>>63))
}

func appendBytes(b []byte, s string) []byte {
	if len(s) < 0x80 { // the common case, without a loop
		return append(append(b, byte(len(s))), s...)
	}
	return append(appendUvarint(b, uint64(len(s))), s...)
}

// bit returns b when v holds, else 0.
func bit(v bool, b byte) byte {
	if v {
		return b
	}
	return 0
}

func (x *Heartbeat) appendCompact(b []byte) []byte {
	b = appendBytes(b, x.User)
	b = appendBytes(b, x.Device)
	b = append(b, byte(x.Kind))
	b = appendBytes(b, x.Gateway)
	b = appendBytes(b, x.Token)
	flags := bit(x.Active, hbActive) | bit(x.Background, hbBackground) |
		bit(x.Meta != nil, hbMeta) | bit(x.At != nil, hbAt)
	b = append(b, flags)
	if x.Meta != nil {
		keys := sortedKeys(x.Meta)
		b = appendUvarint(b, uint64(len(keys)))
		for _, k := range keys {
			b = appendBytes(appendBytes(b, k), x.Meta[k])
		}
	}
	if x.At != nil {
		b = appendVarint(b, *x.At)
	}
	return b
}

func (x *Ack) appendCompact(b []byte) []byte {
	b = appendBytes(b, x.Token)
	b = append(b, bit(x.Error != nil, ackError)|bit(x.Changes != nil, ackChanges)|bit(x.Reassert, ackReassert))
	if x.Error != nil {
		b = x.Error.appendCompact(b, 0)
	}
	if x.Changes != nil {
		b = appendUvarint(b, uint64(len(x.Changes)))
		for _, c := range x.Changes {
			b = appendBytes(b, c.User)
			b = append(b, byte(c.From), byte(c.To))
			b = appendVarint(b, c.At)
		}
	}
	return b
}

func (x *Error) appendCompact(b []byte, depth int) []byte {
	b = appendBytes(b, x.Code)
	b = appendBytes(b, x.Message)
	b = appendBytes(b, x.Field)
	b = appendBytes(b, x.Reason)
	b = appendBytes(b, x.Op)
	cause := x.Cause != nil && depth < maxErrorDepth
	b = append(b, bit(x.Unavailable, errUnavailable)|bit(cause, errCause))
	if cause {
		b = x.Cause.appendCompact(b, depth+1)
	}
	return b
}

func appendCompactMessages(b []byte, ms []Message) []byte {
	b = appendUvarint(b, uint64(len(ms)))
	for _, m := range ms {
		b = appendBytes(appendBytes(appendBytes(appendBytes(b, m.Kind), m.Channel), m.Payload), m.ID)
	}
	return b
}

func appendCompactCall(b []byte, c *core.Call) []byte {
	if c.Source != "" {
		b = appendBytes(append(b, callSource), c.Source)
	} else {
		b = appendBytes(append(b, callSHA), c.SHA)
	}
	b = appendUvarint(b, uint64(len(c.Keys)))
	for _, k := range c.Keys {
		b = appendBytes(b, k)
	}
	b = appendUvarint(b, uint64(len(c.Args)))
	for _, a := range c.Args {
		b = appendBytes(b, a)
	}
	return b
}

func appendCompactResult(b []byte, r core.Result) []byte {
	if r.Err != nil {
		return EncodeError(r.Err).appendCompact(append(b, resultError), 0)
	}
	return appendCompactValue(append(b, resultValue), r.Value)
}

func appendCompactValue(b []byte, v core.Value) []byte {
	switch v.Kind {
	case core.ValueInt:
		return appendVarint(append(b, valueInt), v.Int)
	case core.ValueString:
		return appendBytes(append(b, valueString), v.Str)
	case core.ValueArray:
		b = appendUvarint(append(b, valueArray), uint64(len(v.Array)))
		for _, item := range v.Array {
			b = appendCompactValue(b, item)
		}
		return b
	}
	return append(b, valueNil)
}

// grow returns s with length n, zeroed, reusing its room.
func grow[T any](s []T, n int) []T {
	if s == nil || cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// compactReader reads one compact message. The strings it returns are
// substrings of s, one copy of the whole message, so that reading a
// string allocates nothing.
type compactReader struct {
	s    string
	i    int
	what string
	path []pathElem // where the reader is, for error messages
}

func (r *compactReader) fail(reason string) error {
	return &DecodeError{What: r.what, Field: fieldOf(r.path), Reason: reason}
}

func (r *compactReader) truncated() error {
	return r.fail("truncated compact message")
}

// enter and leave track the field being read, for error messages: a
// key, or an index when key is "".
func (r *compactReader) enter(key string, index int) {
	r.path = append(r.path, pathElem{key: key, index: index})
}

func (r *compactReader) leave() { r.path = r.path[:len(r.path)-1] }

func (r *compactReader) byte() (byte, error) {
	if r.i >= len(r.s) {
		return 0, r.truncated()
	}
	c := r.s[r.i]
	r.i++
	return c, nil
}

func (r *compactReader) uvarint() (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if r.i >= len(r.s) {
			return 0, r.truncated()
		}
		c := r.s[r.i]
		r.i++
		if c < 0x80 {
			if c == 0 && shift > 0 || shift == 63 && c > 1 {
				return 0, r.fail("invalid varint")
			}
			return x | uint64(c)<<shift, nil
		}
		x |= uint64(c&0x7f) << shift
	}
	return 0, r.fail("invalid varint")
}

func (r *compactReader) varint() (int64, error) {
	u, err := r.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

// count reads a list's length: at most max, and at most the bytes left
// (every item takes one byte or more).
func (r *compactReader) count(max int) (int, error) {
	n, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(max) {
		return 0, r.fail("more than " + strconv.Itoa(max) + " items")
	}
	if n > uint64(len(r.s)-r.i) {
		return 0, r.truncated()
	}
	return int(n), nil
}

func (r *compactReader) str() (string, error) {
	if r.i < len(r.s) && r.s[r.i] < 0x80 { // the common case, without a loop
		n := int(r.s[r.i])
		if n > len(r.s)-r.i-1 {
			return "", r.truncated()
		}
		s := r.s[r.i+1 : r.i+1+n]
		r.i += 1 + n
		return s, nil
	}
	n, err := r.uvarint()
	if err != nil {
		return "", err
	}
	if n > uint64(len(r.s)-r.i) {
		return "", r.truncated()
	}
	s := r.s[r.i : r.i+int(n)]
	r.i += int(n)
	return s, nil
}

func (r *compactReader) flags(defined byte) (byte, error) {
	f, err := r.byte()
	if err == nil && f&^defined != 0 {
		err = r.fail("unknown flags " + strconv.Itoa(int(f)))
	}
	return f, err
}

// end checks that nothing follows the message.
func (r *compactReader) end() error {
	if r.i != len(r.s) {
		return r.fail("trailing data at byte " + strconv.Itoa(r.i))
	}
	return nil
}

// compactHeader sets r to read b, a compact message, and reads its header:
// it returns the kind, r is after it.
func compactHeader(r *compactReader, what string, b []byte) (byte, error) {
	if len(b) > MaxMessage {
		return 0, &DecodeError{What: what, Reason: "larger than " + strconv.Itoa(MaxMessage) + " bytes"}
	}
	*r = compactReader{s: string(b), i: 1, what: what, path: r.path[:0]}
	v, err := r.byte()
	if err != nil {
		return 0, err
	}
	if v != Version {
		return 0, &VersionError{Got: int(v)}
	}
	return r.byte()
}

// decodeCompactRequest reads a compact request (b[0] is Compact).
func decodeCompactRequest(b []byte) (Request, error) {
	var d Decoder
	req, err := d.decodeCompact(b)
	if err != nil {
		return Request{}, err
	}
	// the request's own, not the decoder's
	switch a := req.Args.(type) {
	case *Heartbeat:
		x := *a
		req.Args = &x
	case *HeartbeatBatch:
		req.Args = &HeartbeatBatch{Beats: a.Beats}
	case *Resume:
		x := *a
		req.Args = &x
	}
	return req, nil
}

// Decoder decodes requests as DecodeRequest does, into room of its own
// that it reuses: a compact request's arguments, the reader's state. The
// Request it returns, and what its Args point to, are valid until the
// next Decode; the strings in them stay valid after (they share one copy
// of the message). A module decodes every request with one Decoder, so
// that the hot path allocates only that copy.
type Decoder struct {
	r      compactReader
	path   [8]pathElem
	beat   Heartbeat
	batch  HeartbeatBatch
	resume Resume
}

// Decode is DecodeRequest into d's room.
func (d *Decoder) Decode(b []byte) (Request, error) {
	if len(b) > 0 && b[0] == Compact {
		return d.decodeCompact(b)
	}
	return DecodeRequest(b)
}

func (d *Decoder) decodeCompact(b []byte) (Request, error) {
	r := &d.r
	r.path = d.path[:0]
	kind, err := compactHeader(r, "request", b)
	if err != nil {
		return Request{}, err
	}
	var req Request
	r.enter("now", 0)
	req.Now, err = r.varint()
	if err == nil && req.Now < 0 {
		err = r.fail("must not be negative")
	}
	r.leave()
	if err != nil {
		return Request{}, err
	}
	r.enter("args", 0)
	switch kind {
	case compactHeartbeat:
		d.beat = Heartbeat{}
		req.Op, req.Args, err = OpHeartbeat, &d.beat, r.heartbeat(&d.beat)
	case compactBatch:
		req.Op, req.Args, err = OpHeartbeatBatch, &d.batch, r.beats(&d.batch)
	case compactResume:
		req.Op, req.Args, err = OpResume, &d.resume, r.resume(&d.resume)
	default:
		r.path = r.path[:0]
		err = r.fail("unknown compact request kind " + strconv.Itoa(int(kind)))
	}
	if err == nil {
		r.path = r.path[:0]
		err = r.end()
	}
	if err != nil {
		return Request{}, err
	}
	return req, nil
}

func (r *compactReader) heartbeat(x *Heartbeat) (err error) {
	if x.User, err = r.str(); err != nil {
		return err
	}
	if x.Device, err = r.str(); err != nil {
		return err
	}
	kind, err := r.byte()
	if err != nil {
		return err
	}
	x.Kind = Kind(kind)
	if x.Gateway, err = r.str(); err != nil {
		return err
	}
	if x.Token, err = r.str(); err != nil {
		return err
	}
	f, err := r.flags(hbFlags)
	if err != nil {
		return err
	}
	x.Active, x.Background = f&hbActive != 0, f&hbBackground != 0
	if f&hbMeta != 0 {
		r.enter("meta", 0)
		if x.Meta, err = r.strMap(); err != nil {
			return err
		}
		r.leave()
	}
	if f&hbAt != 0 {
		at, err := r.varint()
		if err != nil {
			return err
		}
		x.At = &at
	}
	return nil
}

// strMap reads a map of strings, keys in increasing order.
func (r *compactReader) strMap() (map[string]string, error) {
	n, err := r.count(MaxMessage)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, n)
	prev := ""
	for i := range n {
		k, err := r.str()
		if err != nil {
			return nil, err
		}
		if i > 0 && k <= prev {
			return nil, r.fail("keys out of order or repeated")
		}
		if m[k], err = r.str(); err != nil {
			return nil, err
		}
		prev = k
	}
	return m, nil
}

func (r *compactReader) beats(x *HeartbeatBatch) error {
	r.enter("beats", 0)
	n, err := r.count(MaxMessage)
	if err != nil {
		return err
	}
	x.Beats = grow(x.Beats, n)
	r.enter("", 0)
	for i := range x.Beats {
		r.path[len(r.path)-1].index = i
		if err := r.heartbeat(&x.Beats[i]); err != nil {
			return err
		}
	}
	r.leave()
	r.leave()
	return nil
}

func (r *compactReader) resume(x *Resume) (err error) {
	r.enter("plan", 0)
	if x.Plan, err = r.varint(); err != nil {
		return err
	}
	r.path[len(r.path)-1].key = "results"
	n, err := r.count(MaxCalls)
	if err != nil {
		return err
	}
	x.Results = grow(x.Results, n)
	r.enter("", 0)
	for i := range x.Results {
		r.path[len(r.path)-1].index = i
		if x.Results[i], err = r.result(); err != nil {
			return err
		}
	}
	r.leave()
	r.leave()
	return nil
}

func (r *compactReader) result() (core.Result, error) {
	tag, err := r.byte()
	if err != nil {
		return core.Result{}, err
	}
	switch tag {
	case resultValue:
		v, err := r.value(0)
		return core.Result{Value: v}, err
	case resultError:
		e, err := r.error(0)
		if err != nil {
			return core.Result{}, err
		}
		return core.Result{Err: e.Err()}, nil
	}
	return core.Result{}, r.fail("unknown result tag " + strconv.Itoa(int(tag)))
}

func (r *compactReader) value(depth int) (core.Value, error) {
	if depth > maxValueDepth {
		return core.Value{}, r.fail("nested deeper than " + strconv.Itoa(maxValueDepth))
	}
	tag, err := r.byte()
	if err != nil {
		return core.Value{}, err
	}
	switch tag {
	case valueNil:
		return core.Value{}, nil
	case valueInt:
		n, err := r.varint()
		return core.Value{Kind: core.ValueInt, Int: n}, err
	case valueString:
		s, err := r.str()
		return core.Value{Kind: core.ValueString, Str: s}, err
	case valueArray:
		n, err := r.count(MaxMessage)
		if err != nil || n == 0 {
			return core.Value{Kind: core.ValueArray}, err
		}
		items := make([]core.Value, n)
		for i := range items {
			if items[i], err = r.value(depth + 1); err != nil {
				return core.Value{}, err
			}
		}
		return core.Value{Kind: core.ValueArray, Array: items}, nil
	}
	return core.Value{}, r.fail("unknown value tag " + strconv.Itoa(int(tag)))
}

func (r *compactReader) error(depth int) (*Error, error) {
	if depth > maxErrorDepth {
		return nil, r.fail("error causes nested too deep")
	}
	e := &Error{}
	var err error
	for _, p := range []*string{&e.Code, &e.Message, &e.Field, &e.Reason, &e.Op} {
		if *p, err = r.str(); err != nil {
			return nil, err
		}
	}
	if e.Code == "" {
		return nil, r.fail("error without a code")
	}
	f, err := r.flags(errFlags)
	if err != nil {
		return nil, err
	}
	e.Unavailable = f&errUnavailable != 0
	if f&errCause != 0 {
		r.enter("cause", 0)
		if e.Cause, err = r.error(depth + 1); err != nil {
			return nil, err
		}
		r.leave()
	}
	return e, nil
}

// decodeCompactResponse reads a compact response to a request of op (b[0]
// is Compact).
func decodeCompactResponse(op string, b []byte) (Response, error) {
	var path [8]pathElem
	r := &compactReader{path: path[:0]}
	kind, err := compactHeader(r, "response", b)
	if err != nil {
		return Response{}, err
	}
	var resp Response
	switch {
	case kind == compactCalls:
		err = r.calls(&resp)
	case kind == compactAck && op == OpHeartbeat:
		a := new(Ack)
		r.enter("result", 0)
		err = r.ack(a)
		r.leave()
		resp.Result = a
		if err == nil {
			resp.Messages, err = r.messages()
		}
	case kind == compactAcks && op == OpHeartbeatBatch:
		a := new(Acks)
		resp.Result = a
		err = r.acks(a)
		if err == nil {
			resp.Messages, err = r.messages()
		}
	default:
		err = r.fail("compact response kind " + strconv.Itoa(int(kind)) + " is not an answer to " + truncate(op))
	}
	if err == nil {
		err = r.end()
	}
	if err != nil {
		return Response{}, err
	}
	return resp, nil
}

func (r *compactReader) calls(resp *Response) (err error) {
	r.enter("plan", 0)
	if resp.Plan, err = r.varint(); err != nil {
		return err
	}
	if resp.Plan <= 0 {
		return r.fail("must be positive")
	}
	r.path[0].key = "calls"
	n, err := r.count(MaxCalls)
	if err != nil {
		return err
	}
	if n == 0 {
		return r.fail("must not be empty")
	}
	resp.Calls = make([]core.Call, n)
	r.enter("", 0)
	for i := range resp.Calls {
		r.path[1].index = i
		if err := r.call(&resp.Calls[i]); err != nil {
			return err
		}
	}
	r.leave()
	r.leave()
	return nil
}

func (r *compactReader) call(c *core.Call) error {
	tag, err := r.byte()
	if err != nil {
		return err
	}
	s, err := r.str()
	if err != nil {
		return err
	}
	switch {
	case s == "":
		return r.fail("needs exactly one of a non-empty \"sha\" or \"src\"")
	case tag == callSHA:
		c.SHA = s
	case tag == callSource:
		c.Source = s
	default:
		return r.fail("unknown call tag " + strconv.Itoa(int(tag)))
	}
	if c.Keys, err = r.strs(); err != nil {
		return err
	}
	c.Args, err = r.strs()
	return err
}

func (r *compactReader) strs() ([]string, error) {
	n, err := r.count(MaxMessage)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = r.str(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *compactReader) ack(x *Ack) (err error) {
	if x.Token, err = r.str(); err != nil {
		return err
	}
	f, err := r.flags(ackFlags)
	if err != nil {
		return err
	}
	x.Reassert = f&ackReassert != 0
	if f&ackError != 0 {
		if x.Error, err = r.error(0); err != nil {
			return err
		}
	}
	if f&ackChanges != 0 {
		n, err := r.count(MaxMessage)
		if err != nil {
			return err
		}
		x.Changes = make([]Change, n)
		for i := range x.Changes {
			c := &x.Changes[i]
			if c.User, err = r.str(); err != nil {
				return err
			}
			from, err := r.byte()
			if err != nil {
				return err
			}
			to, err := r.byte()
			if err != nil {
				return err
			}
			c.From, c.To = Status(from), Status(to)
			if c.At, err = r.varint(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *compactReader) acks(x *Acks) error {
	r.enter("result", 0)
	r.enter("acks", 0)
	n, err := r.count(MaxMessage)
	if err != nil {
		return err
	}
	x.Acks = make([]Ack, n)
	r.enter("", 0)
	for i := range x.Acks {
		r.path[2].index = i
		if err := r.ack(&x.Acks[i]); err != nil {
			return err
		}
	}
	r.path = r.path[:0]
	return nil
}

func (r *compactReader) messages() ([]Message, error) {
	r.enter("messages", 0)
	n, err := r.count(MaxMessage)
	if err != nil || n == 0 {
		r.leave()
		return nil, err
	}
	ms := make([]Message, n)
	for i := range ms {
		m := &ms[i]
		for _, p := range []*string{&m.Kind, &m.Channel, &m.Payload, &m.ID} {
			if *p, err = r.str(); err != nil {
				return nil, err
			}
		}
	}
	r.leave()
	return ms, nil
}
