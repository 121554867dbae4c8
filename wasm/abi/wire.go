package abi

import (
	"sort"
	"strconv"
)

//go:generate go run ./internal/gen

// wire is a type of the ABI that the codec reads and writes.
type wire interface {
	appendJSON(b []byte) []byte
}

// wirePtr is a pointer to a type of the ABI that the codec reads into.
type wirePtr interface {
	decodeJSON(r *reader) error
}

// Marshal returns the ABI's JSON of v, a value of (or pointer to) one of
// the package's message types, such as Heartbeat, Ack or Config. It is the
// encoding the ABI defines; encoding/json approximates it from the field
// tags but does not carry strings that are not UTF-8.
func Marshal(v any) ([]byte, error) {
	w, ok := v.(wire)
	if !ok {
		return nil, &DecodeError{What: "value", Reason: "not an ABI type"}
	}
	return w.appendJSON(nil), nil
}

// Unmarshal reads the ABI's JSON b into v, a pointer to one of the
// package's message types, as strictly as the decoders do.
func Unmarshal(b []byte, v any) error {
	p, ok := v.(wirePtr)
	if !ok {
		return &DecodeError{What: "value", Reason: "not a pointer to an ABI type"}
	}
	if len(b) > MaxMessage {
		return &DecodeError{What: "value", Reason: "larger than " + strconv.Itoa(MaxMessage) + " bytes"}
	}
	r := newReader("value", b)
	if err := p.decodeJSON(r); err != nil {
		return err
	}
	return r.end()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Enumerations and durations.

func (k Kind) appendJSON(b []byte) []byte     { return appendEnum(b, uint8(k), kindName(k)) }
func (s Status) appendJSON(b []byte) []byte   { return appendEnum(b, uint8(s), statusName(s)) }
func (m Manual) appendJSON(b []byte) []byte   { return appendEnum(b, uint8(m), manualName(m)) }
func (p Policy) appendJSON(b []byte) []byte   { return appendEnum(b, uint8(p), policyName(p)) }
func (l Layout) appendJSON(b []byte) []byte   { return appendEnum(b, uint8(l), layoutName(l)) }
func (d Duration) appendJSON(b []byte) []byte { return appendDuration(b, d) }

func appendEnum(b []byte, n uint8, name string) []byte {
	if name != "" {
		return appendJSONString(b, name)
	}
	return strconv.AppendUint(b, uint64(n), 10)
}

func (k *Kind) decodeJSON(r *reader) error {
	n, err := r.enum("kind", parseKind)
	*k = Kind(n)
	return err
}

func (s *Status) decodeJSON(r *reader) error {
	n, err := r.enum("status", parseStatus)
	*s = Status(n)
	return err
}

func (m *Manual) decodeJSON(r *reader) error {
	n, err := r.enum("manual status", parseManual)
	*m = Manual(n)
	return err
}

func (p *Policy) decodeJSON(r *reader) error {
	n, err := r.enum("policy", parsePolicy)
	*p = Policy(n)
	return err
}

func (l *Layout) decodeJSON(r *reader) error {
	n, err := r.enum("layout", parseLayout)
	*l = Layout(n)
	return err
}

// enum reads a name that parse knows or a number 0 to 255.
func (r *reader) enum(what string, parse func(string) (uint8, bool)) (uint8, error) {
	if r.peek() == '"' {
		s, err := r.view()
		if err != nil {
			return 0, err
		}
		if n, ok := parse(s); ok {
			return n, nil
		}
		return 0, r.fail("unknown " + what + " " + truncate(s))
	}
	lit, integer, err := r.number()
	if err != nil {
		return 0, r.fail(what + " must be a name or a number 0 to 255")
	}
	n, perr := strconv.ParseUint(lit, 10, 8)
	if !integer || perr != nil {
		return 0, r.fail(what + " must be a name or a number 0 to 255, got " + truncate(lit))
	}
	return uint8(n), nil
}

func (d *Duration) decodeJSON(r *reader) error {
	if r.null() {
		*d = 0
		return nil
	}
	lit, _, err := r.number()
	if err != nil {
		return err
	}
	v, err := parseDuration(lit)
	if err != nil {
		return r.fail(err.(*DecodeError).Reason)
	}
	*d = v
	return nil
}

// decodeError reads an error object, or null as nil. Its chain of causes
// may be at most maxErrorDepth long.
func (r *reader) decodeError() (*Error, error) {
	if r.null() {
		return nil, nil
	}
	if r.errDepth++; r.errDepth > maxErrorDepth {
		return nil, r.fail("error causes nested too deep")
	}
	e := &Error{}
	err := e.decodeJSON(r)
	r.errDepth--
	if err == nil && e.Code == "" {
		err = r.fail("error without a code")
	}
	return e, err
}
