package core

import (
	"strconv"
	"strings"
)

// ValueKind is the type of a normalised Redis reply.
type ValueKind uint8

const (
	// ValueNil is a nil reply (a missing key, or a Lua false).
	ValueNil ValueKind = iota
	// ValueInt is an integer reply.
	ValueInt
	// ValueString is a bulk or status string reply.
	ValueString
	// ValueArray is an array reply.
	ValueArray
)

// Value is the driver-neutral shape of a reply. Adapters build it with
// NilValue, IntValue, StringValue and ArrayValue.
type Value struct {
	Kind  ValueKind
	Int   int64
	Str   string
	Array []Value
}

// NilValue returns a nil reply.
func NilValue() Value { return Value{} }

// IntValue returns an integer reply.
func IntValue(n int64) Value { return Value{Kind: ValueInt, Int: n} }

// StringValue returns a string reply.
func StringValue(s string) Value { return Value{Kind: ValueString, Str: s} }

// ArrayValue returns an array reply.
func ArrayValue(items ...Value) Value { return Value{Kind: ValueArray, Array: items} }

// String renders v for error messages and debugging.
func (v Value) String() string {
	switch v.Kind {
	case ValueNil:
		return "nil"
	case ValueInt:
		return strconv.FormatInt(v.Int, 10)
	case ValueString:
		return strconv.Quote(v.Str)
	case ValueArray:
		items := make([]string, len(v.Array))
		for i, item := range v.Array {
			items[i] = item.String()
		}
		return "[" + strings.Join(items, " ") + "]" // as fmt.Sprint(v.Array)
	}
	return "invalid"
}

// AsInt returns v as an integer: an integer reply, or a string holding one.
func (v Value) AsInt() (int64, error) {
	switch v.Kind {
	case ValueInt:
		return v.Int, nil
	case ValueString:
		n, err := strconv.ParseInt(v.Str, 10, 64)
		if err == nil {
			return n, nil
		}
	}
	return 0, replyErr("want an integer, got %s", v)
}

// AsString returns v as a string: a string reply, or an integer in decimal.
func (v Value) AsString() (string, error) {
	switch v.Kind {
	case ValueString:
		return v.Str, nil
	case ValueInt:
		return strconv.FormatInt(v.Int, 10), nil
	}
	return "", replyErr("want a string, got %s", v)
}

// AsArray returns v's items if v is an array of exactly n items (any length when n < 0).
func (v Value) AsArray(n int) ([]Value, error) {
	if v.Kind != ValueArray {
		return nil, replyErr("want an array, got %s", v)
	}
	if n >= 0 && len(v.Array) != n {
		return nil, replyErr("want %d items, got %d", n, len(v.Array))
	}
	return v.Array, nil
}

// maxReplyCount bounds counts read from replies: no scope, sweep or batch
// comes near it, and sums of a few thousand such counts cannot overflow.
const maxReplyCount = 1 << 40

// AsCount returns v as a count: an integer from 0 to 2^40.
func (v Value) AsCount() (int64, error) {
	n, err := v.AsInt()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > maxReplyCount {
		return 0, replyErr("count %d out of range", n)
	}
	return n, nil
}
