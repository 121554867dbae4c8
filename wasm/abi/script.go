package abi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/presencekit/presence/core"
)

// The script-runner messages: the module asks the host to run script
// calls, the host answers with one result per call.
//
//	{"v":1,"calls":[{"sha":"…","keys":["…"],"args":["…"]},{"src":"…","keys":[…],"args":[…]}]}
//	{"v":1,"results":[{"value":V},{"error":{"code":"noscript","message":"…"}}]}
//	{"v":1,"error":{…}}   (the whole request failed: every call gets the error)
//
// A call carries "sha" (EVALSHA) or "src" (EVAL), never both. A value V
// is null (a nil reply), an integer (a JSON number without fraction or
// exponent, the full int64 range), a string, or an array of values. A
// string that is not valid UTF-8 (keys, arguments and values alike)
// travels as {"b":"<standard base64>"}.

// MaxCalls is the most calls one script request may carry.
const MaxCalls = 1 << 16

// maxValueDepth bounds the nesting of a value.
const maxValueDepth = 32

// EncodeScriptRequest returns the JSON of a script request for calls.
func EncodeScriptRequest(calls []core.Call) []byte {
	n := 32
	for _, c := range calls {
		n += 32 + len(c.SHA) + len(c.Source)
		for _, s := range c.Keys {
			n += len(s) + 3
		}
		for _, s := range c.Args {
			n += len(s) + 3
		}
	}
	b := make([]byte, 0, n)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, Version, 10)
	b = append(b, `,"calls":[`...)
	for i, c := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if c.Source != "" {
			b = append(b, `"src":`...)
			b = appendJSONString(b, c.Source)
		} else {
			b = append(b, `"sha":`...)
			b = appendJSONString(b, c.SHA)
		}
		b = append(b, `,"keys":`...)
		b = appendStrings(b, c.Keys)
		b = append(b, `,"args":`...)
		b = appendStrings(b, c.Args)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// DecodeScriptRequest reads a script request. Every call must carry a
// "sha" or a "src" (not both) and arrays of strings as keys and args.
func DecodeScriptRequest(b []byte) ([]core.Call, error) {
	const what = "script request"
	r, err := newTokens(what, b)
	if err != nil {
		return nil, err
	}
	var calls []core.Call
	seenV, seenCalls := false, false
	err = r.object("", func(key string) error {
		switch key {
		case "v":
			seenV = true
			return r.version()
		case "calls":
			seenCalls = true
			return r.array("calls", func(i int) error {
				if i >= MaxCalls {
					return r.fail("calls", "more than "+strconv.Itoa(MaxCalls)+" calls")
				}
				c, err := r.call("calls[" + strconv.Itoa(i) + "]")
				calls = append(calls, c)
				return err
			})
		}
		return r.fail(key, "unknown field")
	})
	if err == nil {
		err = r.end()
	}
	if err != nil {
		return nil, err
	}
	if !seenV {
		return nil, &VersionError{}
	}
	if !seenCalls {
		return nil, r.fail("calls", "missing")
	}
	return calls, nil
}

func (r *tokens) call(field string) (core.Call, error) {
	var c core.Call
	hasSHA, hasSrc := false, false
	err := r.object(field, func(key string) error {
		var err error
		switch key {
		case "sha":
			hasSHA = true
			c.SHA, err = r.str(field + ".sha")
		case "src":
			hasSrc = true
			c.Source, err = r.str(field + ".src")
		case "keys":
			c.Keys, err = r.strs(field + ".keys")
		case "args":
			c.Args, err = r.strs(field + ".args")
		default:
			err = r.fail(field+"."+key, "unknown field")
		}
		return err
	})
	if err != nil {
		return c, err
	}
	if hasSHA == hasSrc || (hasSHA && c.SHA == "") || (hasSrc && c.Source == "") {
		return c, r.fail(field, "needs exactly one of a non-empty \"sha\" or \"src\"")
	}
	return c, nil
}

// EncodeScriptResponse returns the JSON of the results of a script request.
func EncodeScriptResponse(results []core.Result) []byte {
	b := make([]byte, 0, 64+32*len(results))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, Version, 10)
	b = append(b, `,"results":[`...)
	for i, r := range results {
		if i > 0 {
			b = append(b, ',')
		}
		if r.Err != nil {
			e, _ := json.Marshal(EncodeError(r.Err))
			b = append(b, `{"error":`...)
			b = append(b, e...)
		} else {
			b = append(b, `{"value":`...)
			b = appendValue(b, r.Value)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// EncodeScriptFailure returns the JSON of a script response that fails
// the whole request with err.
func EncodeScriptFailure(err error) []byte {
	e, _ := json.Marshal(EncodeError(err))
	b := append([]byte(`{"v":`), strconv.Itoa(Version)...)
	b = append(b, `,"error":`...)
	b = append(b, e...)
	return append(b, '}')
}

// DecodeScriptResponse reads the response to a script request of n calls:
// n results, or a failure of the whole request, which it returns as n
// results carrying the error.
func DecodeScriptResponse(b []byte, n int) ([]core.Result, error) {
	const what = "script response"
	r, err := newTokens(what, b)
	if err != nil {
		return nil, err
	}
	var results []core.Result
	var failure *Error
	seenV, seenResults := false, false
	err = r.object("", func(key string) error {
		switch key {
		case "v":
			seenV = true
			return r.version()
		case "results":
			seenResults = true
			return r.array("results", func(i int) error {
				if i >= n {
					return r.fail("results", "more results than the "+strconv.Itoa(n)+" calls")
				}
				res, err := r.result("results[" + strconv.Itoa(i) + "]")
				results = append(results, res)
				return err
			})
		case "error":
			var err error
			failure, err = r.errorValue("error")
			return err
		}
		return r.fail(key, "unknown field")
	})
	if err == nil {
		err = r.end()
	}
	if err != nil {
		return nil, err
	}
	if !seenV {
		return nil, &VersionError{}
	}
	switch {
	case failure != nil && seenResults:
		return nil, r.fail("", "has both results and an error")
	case failure != nil:
		out := make([]core.Result, n)
		e := failure.Err()
		for i := range out {
			out[i].Err = e
		}
		return out, nil
	case len(results) != n:
		return nil, r.fail("results", "has "+strconv.Itoa(len(results))+" results for "+strconv.Itoa(n)+" calls")
	}
	return results, nil
}

func (r *tokens) result(field string) (core.Result, error) {
	var res core.Result
	seen := 0
	err := r.object(field, func(key string) error {
		seen++
		switch key {
		case "value":
			v, err := r.value(field+".value", 0)
			res.Value = v
			return err
		case "error":
			e, err := r.errorValue(field + ".error")
			if err == nil {
				res.Err = e.Err()
			}
			return err
		}
		return r.fail(field+"."+key, "unknown field")
	})
	if err == nil && seen != 1 {
		err = r.fail(field, "needs exactly one of \"value\" or \"error\"")
	}
	return res, err
}

// errorValue reads an Error object with encoding/json: its fields are
// few and fixed.
func (r *tokens) errorValue(field string) (*Error, error) {
	var raw json.RawMessage
	if err := r.dec.Decode(&raw); err != nil {
		return nil, r.fail(field, "invalid JSON")
	}
	var e Error
	if err := decodeStrict(r.what, raw, &e); err != nil {
		return nil, r.fail(field, "not an error object")
	}
	if err := checkError(&e, 0); err != nil {
		return nil, r.fail(field, err.Error())
	}
	return &e, nil
}

// tokens reads a message token by token.
type tokens struct {
	what string
	dec  *json.Decoder
}

func newTokens(what string, b []byte) (*tokens, error) {
	if len(b) > MaxMessage {
		return nil, &DecodeError{What: what, Reason: "larger than " + strconv.Itoa(MaxMessage) + " bytes"}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return &tokens{what: what, dec: dec}, nil
}

func (r *tokens) fail(field, reason string) error {
	return &DecodeError{What: r.what, Field: field, Reason: reason}
}

func (r *tokens) token(field string) (json.Token, error) {
	t, err := r.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, r.fail(field, "truncated JSON")
		}
		return nil, r.fail(field, "invalid JSON: "+err.Error())
	}
	return t, nil
}

func (r *tokens) delim(field string, want json.Delim) error {
	t, err := r.token(field)
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return r.fail(field, "want "+string(want))
	}
	return nil
}

// object reads an object, calling each for every key; each must consume
// the key's value.
func (r *tokens) object(field string, each func(key string) error) error {
	if err := r.delim(field, '{'); err != nil {
		return err
	}
	for r.dec.More() {
		t, err := r.token(field)
		if err != nil {
			return err
		}
		key, ok := t.(string)
		if !ok {
			return r.fail(field, "want a key")
		}
		if err := each(key); err != nil {
			return err
		}
	}
	return r.delim(field, '}')
}

// array reads an array, calling each for every element; each must
// consume the element.
func (r *tokens) array(field string, each func(i int) error) error {
	if err := r.delim(field, '['); err != nil {
		return err
	}
	for i := 0; r.dec.More(); i++ {
		if err := each(i); err != nil {
			return err
		}
	}
	return r.delim(field, ']')
}

func (r *tokens) end() error {
	if _, err := r.dec.Token(); err != io.EOF {
		return r.fail("", "trailing data after the object")
	}
	return nil
}

func (r *tokens) version() error {
	t, err := r.token("v")
	if err != nil {
		return err
	}
	n, ok := t.(json.Number)
	if !ok {
		return r.fail("v", "want a number")
	}
	v, err := strconv.Atoi(string(n))
	if err != nil {
		return r.fail("v", "want an integer")
	}
	if v != Version {
		return &VersionError{Got: v}
	}
	return nil
}

// str reads a string: a JSON string or {"b":"<base64>"}.
func (r *tokens) str(field string) (string, error) {
	t, err := r.token(field)
	if err != nil {
		return "", err
	}
	return r.strFrom(field, t)
}

func (r *tokens) strFrom(field string, t json.Token) (string, error) {
	switch t := t.(type) {
	case string:
		return t, nil
	case json.Delim:
		if t == '{' {
			return r.binary(field)
		}
	}
	return "", r.fail(field, "want a string")
}

// binary reads the rest of {"b":"<base64>"} after its '{'.
func (r *tokens) binary(field string) (string, error) {
	t, err := r.token(field)
	if err != nil {
		return "", err
	}
	if k, ok := t.(string); !ok || k != "b" {
		return "", r.fail(field, "want {\"b\":\"<base64>\"}")
	}
	t, err = r.token(field)
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", r.fail(field, "want base64 in a string")
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", r.fail(field, "invalid base64")
	}
	if err := r.delim(field, '}'); err != nil {
		return "", err
	}
	return string(raw), nil
}

func (r *tokens) strs(field string) ([]string, error) {
	out := []string{}
	err := r.array(field, func(i int) error {
		s, err := r.str(field + "[" + strconv.Itoa(i) + "]")
		out = append(out, s)
		return err
	})
	return out, err
}

// value reads a reply value.
func (r *tokens) value(field string, depth int) (core.Value, error) {
	if depth > maxValueDepth {
		return core.Value{}, r.fail(field, "nested deeper than "+strconv.Itoa(maxValueDepth))
	}
	t, err := r.token(field)
	if err != nil {
		return core.Value{}, err
	}
	switch t := t.(type) {
	case nil:
		return core.NilValue(), nil
	case json.Number:
		n, err := strconv.ParseInt(string(t), 10, 64)
		if err != nil {
			return core.Value{}, r.fail(field, "want an int64, got "+truncate(string(t)))
		}
		return core.IntValue(n), nil
	case string:
		return core.StringValue(t), nil
	case json.Delim:
		switch t {
		case '{':
			s, err := r.binary(field)
			return core.StringValue(s), err
		case '[':
			var items []core.Value
			for i := 0; r.dec.More(); i++ {
				v, err := r.value(field+"["+strconv.Itoa(i)+"]", depth+1)
				if err != nil {
					return core.Value{}, err
				}
				items = append(items, v)
			}
			if err := r.delim(field, ']'); err != nil {
				return core.Value{}, err
			}
			return core.ArrayValue(items...), nil
		}
	}
	return core.Value{}, r.fail(field, "want null, an integer, a string or an array")
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendValue(b []byte, v core.Value) []byte {
	switch v.Kind {
	case core.ValueInt:
		return strconv.AppendInt(b, v.Int, 10)
	case core.ValueString:
		return appendString(b, v.Str)
	case core.ValueArray:
		b = append(b, '[')
		for i, item := range v.Array {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, item)
		}
		return append(b, ']')
	}
	return append(b, "null"...)
}

// appendString appends s as a JSON string, or as {"b":"<base64>"} when s
// is not valid UTF-8.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		b = append(b, `{"b":"`...)
		b = base64.StdEncoding.AppendEncode(b, []byte(s))
		return append(b, `"}`...)
	}
	return appendJSONString(b, s)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string; s is valid UTF-8 (invalid
// bytes would come out as they are).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
