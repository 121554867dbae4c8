package abi

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/presencekit/presence/core"
)

// The script calls of a plan and their results, as they travel in a
// response ("calls") and in a resume request ("results"):
//
//	"calls":[{"sha":"…","keys":["…"],"args":["…"]},{"src":"…","keys":[…],"args":[…]}]
//	"results":[{"value":V},{"error":{"code":"noscript","message":"…"}}]
//
// A call carries "sha" (EVALSHA) or "src" (EVAL), never both. A value V
// is null (a nil reply), an integer (a JSON number without fraction or
// exponent, the full int64 range), a string, or an array of values. A
// string that is not valid UTF-8 (keys, arguments and values alike)
// travels as {"b":"<standard base64>"}.

// MaxCalls is the most calls one message may carry.
const MaxCalls = 1 << 16

// maxValueDepth bounds the nesting of a value.
const maxValueDepth = 32

// Calls is the wire form of the script calls a plan waits for.
type Calls []core.Call

func (cs Calls) appendJSON(b []byte) []byte {
	b = append(b, '[')
	for i, c := range cs {
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
	return append(b, ']')
}

func (cs *Calls) decodeJSON(r *reader) error {
	*cs = nil
	return r.array(func(i int) error {
		if i >= MaxCalls {
			return r.fail("more than " + strconv.Itoa(MaxCalls) + " calls")
		}
		c, err := r.call()
		*cs = append(*cs, c)
		return err
	})
}

// Results is the wire form of the results of a plan's calls, one per
// call and in order: a value, or an error (abi.EncodeError of the
// store's error; code "noscript" makes the plan resend the call by
// source, "unavailable" marks a failure that may be retried).
type Results []core.Result

func (rs Results) appendJSON(b []byte) []byte {
	if rs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		if r.Err != nil {
			b = append(b, `{"error":`...)
			b = EncodeError(r.Err).appendJSON(b)
		} else {
			b = append(b, `{"value":`...)
			b = appendValue(b, r.Value)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func (rs *Results) decodeJSON(r *reader) error {
	*rs = nil
	if r.null() {
		return nil
	}
	*rs = Results{}
	return r.array(func(i int) error {
		if i >= MaxCalls {
			return r.fail("more than " + strconv.Itoa(MaxCalls) + " results")
		}
		res, err := r.result()
		*rs = append(*rs, res)
		return err
	})
}

func (r *reader) call() (core.Call, error) {
	var c core.Call
	hasSHA, hasSrc := false, false
	err := r.object(func(key string) (err error) {
		switch key {
		case "sha":
			hasSHA = true
			c.SHA, err = r.str()
		case "src":
			hasSrc = true
			c.Source, err = r.str()
		case "keys":
			c.Keys, err = r.strs()
		case "args":
			c.Args, err = r.strs()
		default:
			err = r.unknown()
		}
		return err
	})
	if err != nil {
		return c, err
	}
	if hasSHA == hasSrc || (hasSHA && c.SHA == "") || (hasSrc && c.Source == "") {
		return c, r.fail("needs exactly one of a non-empty \"sha\" or \"src\"")
	}
	return c, nil
}

func (r *reader) result() (core.Result, error) {
	var res core.Result
	seen := 0
	err := r.object(func(key string) error {
		seen++
		switch key {
		case "value":
			v, err := r.value(0)
			res.Value = v
			return err
		case "error":
			e, err := r.decodeError()
			if err == nil && e == nil {
				err = r.fail("null")
			}
			if err == nil {
				res.Err = e.Err()
			}
			return err
		}
		return r.unknown()
	})
	if err == nil && seen != 1 {
		err = r.fail("needs exactly one of \"value\" or \"error\"")
	}
	return res, err
}

// value reads a reply value.
func (r *reader) value(depth int) (core.Value, error) {
	if depth > maxValueDepth {
		return core.Value{}, r.fail("nested deeper than " + strconv.Itoa(maxValueDepth))
	}
	switch c := r.peek(); {
	case c == '"' || c == '{':
		s, err := r.str()
		return core.Value{Kind: core.ValueString, Str: s}, err
	case c == '[':
		var items []core.Value
		err := r.array(func(i int) error {
			v, err := r.value(depth + 1)
			items = append(items, v)
			return err
		})
		return core.Value{Kind: core.ValueArray, Array: items}, err
	case r.null():
		return core.Value{}, nil
	case c == '-' || c >= '0' && c <= '9':
		n, err := r.int64()
		return core.Value{Kind: core.ValueInt, Int: n}, err
	}
	return core.Value{}, r.unexpected("null, an integer, a string or an array")
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
