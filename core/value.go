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

// Value is the driver-neutral shape of a reply: the field its Kind names
// holds it, and the zero Value is a nil reply. Adapters build it as a
// literal, such as Value{Kind: ValueInt, Int: n}.
type Value struct {
	Kind  ValueKind
	Int   int64   // of a ValueInt
	Str   string  // of a ValueString
	Array []Value // of a ValueArray
}

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

// asInt returns v as an integer: an integer reply, or a string holding one.
func (v Value) asInt() (int64, error) {
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

// asString returns v as a string: a string reply, or an integer in decimal.
func (v Value) asString() (string, error) {
	switch v.Kind {
	case ValueString:
		return v.Str, nil
	case ValueInt:
		return strconv.FormatInt(v.Int, 10), nil
	}
	return "", replyErr("want a string, got %s", v)
}

// asArray returns v's items if v is an array of exactly n items (any length when n < 0).
func (v Value) asArray(n int) ([]Value, error) {
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

// asCount returns v as a count: an integer from 0 to 2^40.
func (v Value) asCount() (int64, error) {
	n, err := v.asInt()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > maxReplyCount {
		return 0, replyErr("count %d out of range", n)
	}
	return n, nil
}
