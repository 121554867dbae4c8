package abi

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/presencekit/presence/core"
)

// Enumerations travel by name ("web", "ONLINE", "exclusive", "DND",
// "compact", as the core's String methods spell them). A value the core
// does not know travels as its number, so that the module's core rejects
// it exactly as a native core would; decoders accept either form.

// Kind is core.Kind on the wire.
type Kind core.Kind

// Status is core.Status on the wire.
type Status core.Status

// Manual is core.Manual on the wire.
type Manual core.Manual

// Policy is core.Policy on the wire.
type Policy core.Policy

// Layout is core.Layout on the wire.
type Layout core.Layout

func marshalEnum(n uint8, name string, valid bool) ([]byte, error) {
	if valid {
		return json.Marshal(name)
	}
	return []byte(strconv.Itoa(int(n))), nil
}

// unmarshalEnum reads a name that parse knows, or a number 0 to 255.
func unmarshalEnum(b []byte, what string, parse func(string) (uint8, bool)) (uint8, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, err
		}
		if n, ok := parse(s); ok {
			return n, nil
		}
		return 0, &DecodeError{What: "value", Reason: "unknown " + what + " " + strconv.Quote(s)}
	}
	n, err := strconv.ParseUint(string(b), 10, 8)
	if err != nil {
		return 0, &DecodeError{What: "value", Reason: what + " must be a name or a number 0 to 255, got " + truncate(string(b))}
	}
	return uint8(n), nil
}

// MarshalJSON writes the kind's name, or its number if it has none.
func (k Kind) MarshalJSON() ([]byte, error) {
	return marshalEnum(uint8(k), core.Kind(k).String(), validName(core.Kind(k).String(), core.ParseKind))
}

// UnmarshalJSON reads a kind name or number.
func (k *Kind) UnmarshalJSON(b []byte) error {
	n, err := unmarshalEnum(b, "kind", func(s string) (uint8, bool) { v, ok := core.ParseKind(s); return uint8(v), ok })
	*k = Kind(n)
	return err
}

// MarshalJSON writes the status's name, or its number if it has none.
func (s Status) MarshalJSON() ([]byte, error) {
	return marshalEnum(uint8(s), core.Status(s).String(), core.Status(s).Valid())
}

// UnmarshalJSON reads a status name or number.
func (s *Status) UnmarshalJSON(b []byte) error {
	n, err := unmarshalEnum(b, "status", func(x string) (uint8, bool) { v, ok := core.ParseStatus(x); return uint8(v), ok })
	*s = Status(n)
	return err
}

// MarshalJSON writes the manual status's name, or its number if it has none.
func (m Manual) MarshalJSON() ([]byte, error) {
	return marshalEnum(uint8(m), core.Manual(m).String(), validName(core.Manual(m).String(), core.ParseManual))
}

// UnmarshalJSON reads a manual status name or number.
func (m *Manual) UnmarshalJSON(b []byte) error {
	n, err := unmarshalEnum(b, "manual status", func(x string) (uint8, bool) { v, ok := core.ParseManual(x); return uint8(v), ok })
	*m = Manual(n)
	return err
}

// MarshalJSON writes the policy's name, or its number if it has none.
func (p Policy) MarshalJSON() ([]byte, error) {
	return marshalEnum(uint8(p), core.Policy(p).String(), validName(core.Policy(p).String(), core.ParsePolicy))
}

// UnmarshalJSON reads a policy name or number.
func (p *Policy) UnmarshalJSON(b []byte) error {
	n, err := unmarshalEnum(b, "policy", func(x string) (uint8, bool) { v, ok := core.ParsePolicy(x); return uint8(v), ok })
	*p = Policy(n)
	return err
}

// MarshalJSON writes the layout's name, or its number if it has none.
func (l Layout) MarshalJSON() ([]byte, error) {
	return marshalEnum(uint8(l), core.Layout(l).String(), validName(core.Layout(l).String(), core.ParseLayout))
}

// UnmarshalJSON reads a layout name or number.
func (l *Layout) UnmarshalJSON(b []byte) error {
	n, err := unmarshalEnum(b, "layout", func(x string) (uint8, bool) { v, ok := core.ParseLayout(x); return uint8(v), ok })
	*l = Layout(n)
	return err
}

// validName reports whether name is one that parse knows: the String
// methods spell unknown values as "Kind(9)", which no parser accepts.
func validName[T any](name string, parse func(string) (T, bool)) bool {
	_, ok := parse(name)
	return ok
}

// Duration is a time.Duration on the wire: a JSON number of milliseconds,
// with a fraction when the duration is not a whole number of them.
type Duration time.Duration

// maxMillis is the largest magnitude of a Duration in milliseconds.
const maxMillis = float64(math.MaxInt64) / 1e6

// MarshalJSON writes the duration in milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	if time.Duration(d)%time.Millisecond == 0 {
		return strconv.AppendInt(nil, int64(d)/1e6, 10), nil
	}
	return strconv.AppendFloat(nil, float64(d)/1e6, 'f', -1, 64), nil
}

// UnmarshalJSON reads a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > math.MaxInt64/1_000_000 || n < math.MinInt64/1_000_000 {
			return &DecodeError{What: "value", Reason: "duration out of range: " + truncate(s)}
		}
		*d = Duration(n * 1_000_000)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) >= maxMillis {
		return &DecodeError{What: "value", Reason: "duration must be a number of milliseconds, got " + truncate(s)}
	}
	*d = Duration(math.Round(f * 1e6))
	return nil
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "…"
	}
	return strconv.Quote(s)
}
