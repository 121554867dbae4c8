package abi

import (
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

// name returns s when parse knows it, else "": the core's String methods
// spell unknown values as "Kind(9)", which no parser accepts.
func name[T any](s string, parse func(string) (T, bool)) string {
	if _, ok := parse(s); ok {
		return s
	}
	return ""
}

func kindName(k Kind) string     { return name(core.Kind(k).String(), core.Parse[core.Kind]) }
func statusName(s Status) string { return name(core.Status(s).String(), core.Parse[core.Status]) }
func manualName(m Manual) string { return name(core.Manual(m).String(), core.Parse[core.Manual]) }
func policyName(p Policy) string { return name(core.Policy(p).String(), core.Parse[core.Policy]) }
func layoutName(l Layout) string { return name(core.Layout(l).String(), core.Parse[core.Layout]) }
func parseKind(s string) (uint8, bool) {
	v, ok := core.Parse[core.Kind](s)
	return uint8(v), ok
}
func parseStatus(s string) (uint8, bool) {
	v, ok := core.Parse[core.Status](s)
	return uint8(v), ok
}
func parseManual(s string) (uint8, bool) {
	v, ok := core.Parse[core.Manual](s)
	return uint8(v), ok
}
func parsePolicy(s string) (uint8, bool) {
	v, ok := core.Parse[core.Policy](s)
	return uint8(v), ok
}
func parseLayout(s string) (uint8, bool) {
	v, ok := core.Parse[core.Layout](s)
	return uint8(v), ok
}

// MarshalJSON writes the kind's name, or its number if it has none.
func (k Kind) MarshalJSON() ([]byte, error) { return k.appendJSON(nil), nil }

// UnmarshalJSON reads a kind name or number.
func (k *Kind) UnmarshalJSON(b []byte) error { return Unmarshal(b, k) }

// MarshalJSON writes the status's name, or its number if it has none.
func (s Status) MarshalJSON() ([]byte, error) { return s.appendJSON(nil), nil }

// UnmarshalJSON reads a status name or number.
func (s *Status) UnmarshalJSON(b []byte) error { return Unmarshal(b, s) }

// MarshalJSON writes the manual status's name, or its number if it has none.
func (m Manual) MarshalJSON() ([]byte, error) { return m.appendJSON(nil), nil }

// UnmarshalJSON reads a manual status name or number.
func (m *Manual) UnmarshalJSON(b []byte) error { return Unmarshal(b, m) }

// MarshalJSON writes the policy's name, or its number if it has none.
func (p Policy) MarshalJSON() ([]byte, error) { return p.appendJSON(nil), nil }

// UnmarshalJSON reads a policy name or number.
func (p *Policy) UnmarshalJSON(b []byte) error { return Unmarshal(b, p) }

// MarshalJSON writes the layout's name, or its number if it has none.
func (l Layout) MarshalJSON() ([]byte, error) { return l.appendJSON(nil), nil }

// UnmarshalJSON reads a layout name or number.
func (l *Layout) UnmarshalJSON(b []byte) error { return Unmarshal(b, l) }

// Duration is a time.Duration on the wire: a JSON number of milliseconds,
// with a fraction when the duration is not a whole number of them.
type Duration time.Duration

// MarshalJSON writes the duration in milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) { return d.appendJSON(nil), nil }

// UnmarshalJSON reads a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error { return Unmarshal(b, d) }

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "…"
	}
	return strconv.Quote(s)
}
