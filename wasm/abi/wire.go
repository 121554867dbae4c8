package abi

import (
	"sort"
	"strconv"
	"strings"
)

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

// Messages.

func (s Scope) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("class", s.Class)
	w.str("id", s.ID)
	w.close()
	return w.b
}

func (s *Scope) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "class":
			s.Class, err = r.str()
		case "id":
			s.ID, err = r.str()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (h Heartbeat) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("user", h.User)
	w.str("device", h.Device)
	w.raw("kind", h.Kind.appendJSON(nil))
	w.strOmit("gateway", h.Gateway)
	w.strOmit("token", h.Token)
	w.boolOmit("active", h.Active)
	w.boolOmit("background", h.Background)
	w.strMap("meta", h.Meta)
	if h.At != nil {
		w.int("at", *h.At)
	}
	w.close()
	return w.b
}

func (h *Heartbeat) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "user":
			h.User, err = r.str()
		case "device":
			h.Device, err = r.str()
		case "kind":
			err = h.Kind.decodeJSON(r)
		case "gateway":
			h.Gateway, err = r.str()
		case "token":
			h.Token, err = r.str()
		case "active":
			h.Active, err = r.bool()
		case "background":
			h.Background, err = r.bool()
		case "meta":
			h.Meta, err = r.strMap()
		case "at":
			if r.null() {
				h.At = nil
				return nil
			}
			var at int64
			at, err = r.int64()
			h.At = &at
		default:
			err = r.unknown()
		}
		return err
	})
}

func (h HeartbeatBatch) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.list("beats", len(h.Beats), h.Beats == nil, func(b []byte, i int) []byte { return h.Beats[i].appendJSON(b) })
	w.close()
	return w.b
}

func (h *HeartbeatBatch) decodeJSON(r *reader) error {
	return r.object(func(key string) error {
		if key != "beats" {
			return r.unknown()
		}
		if r.null() {
			h.Beats = nil
			return nil
		}
		h.Beats = []Heartbeat{}
		return r.array(func(i int) error {
			h.Beats = append(h.Beats, Heartbeat{})
			return h.Beats[i].decodeJSON(r)
		})
	})
}

func (e *Error) appendJSON(b []byte) []byte {
	if e == nil {
		return append(b, "null"...)
	}
	w := writer{b: b}
	w.open()
	w.str("code", e.Code)
	w.str("message", e.Message)
	w.strOmit("field", e.Field)
	w.strOmit("reason", e.Reason)
	w.strOmit("op", e.Op)
	w.boolOmit("unavailable", e.Unavailable)
	if e.Cause != nil {
		w.raw("cause", e.Cause.appendJSON(nil))
	}
	w.close()
	return w.b
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

func (e *Error) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "code":
			e.Code, err = r.str()
		case "message":
			e.Message, err = r.str()
		case "field":
			e.Field, err = r.str()
		case "reason":
			e.Reason, err = r.str()
		case "op":
			e.Op, err = r.str()
		case "unavailable":
			e.Unavailable, err = r.bool()
		case "cause":
			e.Cause, err = r.decodeError()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (c Change) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("user", c.User)
	w.raw("from", c.From.appendJSON(nil))
	w.raw("to", c.To.appendJSON(nil))
	w.int("at", c.At)
	w.close()
	return w.b
}

func (c *Change) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "user":
			c.User, err = r.str()
		case "from":
			err = c.From.decodeJSON(r)
		case "to":
			err = c.To.decodeJSON(r)
		case "at":
			c.At, err = r.int64()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (w *writer) changes(k string, cs []Change) {
	w.list(k, len(cs), cs == nil, func(b []byte, i int) []byte { return cs[i].appendJSON(b) })
}

func (r *reader) changes() ([]Change, error) {
	if r.null() {
		return nil, nil
	}
	out := []Change{}
	err := r.array(func(i int) error {
		out = append(out, Change{})
		return out[i].decodeJSON(r)
	})
	return out, err
}

func (a Ack) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("token", a.Token)
	if a.Error != nil {
		w.raw("error", a.Error.appendJSON(nil))
	}
	w.changes("changes", a.Changes)
	w.close()
	return w.b
}

func (a *Ack) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "token":
			a.Token, err = r.str()
		case "error":
			a.Error, err = r.decodeError()
		case "changes":
			a.Changes, err = r.changes()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (a Acks) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.list("acks", len(a.Acks), a.Acks == nil, func(b []byte, i int) []byte { return a.Acks[i].appendJSON(b) })
	w.close()
	return w.b
}

func (a *Acks) decodeJSON(r *reader) error {
	return r.object(func(key string) error {
		if key != "acks" {
			return r.unknown()
		}
		if r.null() {
			a.Acks = nil
			return nil
		}
		a.Acks = []Ack{}
		return r.array(func(i int) error {
			a.Acks = append(a.Acks, Ack{})
			return a.Acks[i].decodeJSON(r)
		})
	})
}

func (l Login) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("user", l.User)
	w.str("device", l.Device)
	w.raw("kind", l.Kind.appendJSON(nil))
	w.strOmit("gateway", l.Gateway)
	w.boolOmit("background", l.Background)
	w.strMap("meta", l.Meta)
	if l.Policy != nil {
		w.raw("policy", l.Policy.appendJSON(nil))
	}
	w.strOmit("token", l.Token)
	w.close()
	return w.b
}

func (l *Login) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "user":
			l.User, err = r.str()
		case "device":
			l.Device, err = r.str()
		case "kind":
			err = l.Kind.decodeJSON(r)
		case "gateway":
			l.Gateway, err = r.str()
		case "background":
			l.Background, err = r.bool()
		case "meta":
			l.Meta, err = r.strMap()
		case "policy":
			if r.null() {
				l.Policy = nil
				return nil
			}
			var p Policy
			err = p.decodeJSON(r)
			l.Policy = &p
		case "token":
			l.Token, err = r.str()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (k Kick) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("user", k.User)
	w.str("device", k.Device)
	w.raw("kind", k.Kind.appendJSON(nil))
	w.str("gateway", k.Gateway)
	w.int("at", k.At)
	w.close()
	return w.b
}

func (k *Kick) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "user":
			k.User, err = r.str()
		case "device":
			k.Device, err = r.str()
		case "kind":
			err = k.Kind.decodeJSON(r)
		case "gateway":
			k.Gateway, err = r.str()
		case "at":
			k.At, err = r.int64()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (l LoginResult) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("token", l.Token)
	w.list("kicked", len(l.Kicked), l.Kicked == nil, func(b []byte, i int) []byte { return l.Kicked[i].appendJSON(b) })
	w.changes("changes", l.Changes)
	w.close()
	return w.b
}

func (l *LoginResult) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "token":
			l.Token, err = r.str()
		case "kicked":
			if r.null() {
				l.Kicked = nil
				return nil
			}
			l.Kicked = []Kick{}
			err = r.array(func(i int) error {
				l.Kicked = append(l.Kicked, Kick{})
				return l.Kicked[i].decodeJSON(r)
			})
		case "changes":
			l.Changes, err = r.changes()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (e End) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("user", e.User)
	w.str("device", e.Device)
	w.strOmit("token", e.Token)
	w.close()
	return w.b
}

func (e *End) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "user":
			e.User, err = r.str()
		case "device":
			e.Device, err = r.str()
		case "token":
			e.Token, err = r.str()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (e Ended) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.bool("removed", e.Removed)
	w.changes("changes", e.Changes)
	w.close()
	return w.b
}

func (e *Ended) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "removed":
			e.Removed, err = r.bool()
		case "changes":
			e.Changes, err = r.changes()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (s SetManual) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("user", s.User)
	w.raw("manual", s.Manual.appendJSON(nil))
	if s.TTL != 0 {
		w.raw("ttl_ms", s.TTL.appendJSON(nil))
	}
	w.close()
	return w.b
}

func (s *SetManual) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "user":
			s.User, err = r.str()
		case "manual":
			err = s.Manual.decodeJSON(r)
		case "ttl_ms":
			err = s.TTL.decodeJSON(r)
		default:
			err = r.unknown()
		}
		return err
	})
}

func (c Changes) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.changes("changes", c.Changes)
	w.close()
	return w.b
}

func (c *Changes) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		if key != "changes" {
			return r.unknown()
		}
		c.Changes, err = r.changes()
		return err
	})
}

func (s StatusArgs) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("user", s.User)
	w.close()
	return w.b
}

func (s *StatusArgs) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		if key != "user" {
			return r.unknown()
		}
		s.User, err = r.str()
		return err
	})
}

func (s StatusesArgs) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.strs("users", s.Users)
	w.close()
	return w.b
}

func (s *StatusesArgs) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		if key != "users" {
			return r.unknown()
		}
		s.Users, err = r.strs()
		return err
	})
}

func (d Device) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("id", d.ID)
	w.raw("kind", d.Kind.appendJSON(nil))
	w.strOmit("gateway", d.Gateway)
	w.raw("state", d.State.appendJSON(nil))
	w.boolOmit("background", d.Background)
	w.int("login_at", d.LoginAt)
	w.int("last_seen", d.LastSeen)
	w.int("last_active", d.LastActive)
	w.strMap("meta", d.Meta)
	w.close()
	return w.b
}

func (d *Device) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "id":
			d.ID, err = r.str()
		case "kind":
			err = d.Kind.decodeJSON(r)
		case "gateway":
			d.Gateway, err = r.str()
		case "state":
			err = d.State.decodeJSON(r)
		case "background":
			d.Background, err = r.bool()
		case "login_at":
			d.LoginAt, err = r.int64()
		case "last_seen":
			d.LastSeen, err = r.int64()
		case "last_active":
			d.LastActive, err = r.int64()
		case "meta":
			d.Meta, err = r.strMap()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (s UserStatus) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.str("user", s.User)
	w.raw("status", s.Status.appendJSON(nil))
	w.raw("manual", s.Manual.appendJSON(nil))
	w.intOmit("manual_until", s.ManualUntil)
	w.list("devices", len(s.Devices), s.Devices == nil, func(b []byte, i int) []byte { return s.Devices[i].appendJSON(b) })
	w.int("at", s.At)
	w.close()
	return w.b
}

func (s *UserStatus) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "user":
			s.User, err = r.str()
		case "status":
			err = s.Status.decodeJSON(r)
		case "manual":
			err = s.Manual.decodeJSON(r)
		case "manual_until":
			s.ManualUntil, err = r.int64()
		case "devices":
			if r.null() {
				s.Devices = nil
				return nil
			}
			s.Devices = []Device{}
			err = r.array(func(i int) error {
				s.Devices = append(s.Devices, Device{})
				return s.Devices[i].decodeJSON(r)
			})
		case "at":
			s.At, err = r.int64()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (s Statuses) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.list("statuses", len(s.Statuses), s.Statuses == nil, func(b []byte, i int) []byte { return s.Statuses[i].appendJSON(b) })
	w.close()
	return w.b
}

func (s *Statuses) decodeJSON(r *reader) error {
	return r.object(func(key string) error {
		if key != "statuses" {
			return r.unknown()
		}
		if r.null() {
			s.Statuses = nil
			return nil
		}
		s.Statuses = []UserStatus{}
		return r.array(func(i int) error {
			s.Statuses = append(s.Statuses, UserStatus{})
			return s.Statuses[i].decodeJSON(r)
		})
	})
}

func (t Touch) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.raw("scope", t.Scope.appendJSON(nil))
	w.str("member", t.Member)
	w.close()
	return w.b
}

func (t *Touch) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "scope":
			err = t.Scope.decodeJSON(r)
		case "member":
			t.Member, err = r.str()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (t TouchBatch) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.list("touches", len(t.Touches), t.Touches == nil, func(b []byte, i int) []byte { return t.Touches[i].appendJSON(b) })
	w.close()
	return w.b
}

func (t *TouchBatch) decodeJSON(r *reader) error {
	return r.object(func(key string) error {
		if key != "touches" {
			return r.unknown()
		}
		if r.null() {
			t.Touches = nil
			return nil
		}
		t.Touches = []Touch{}
		return r.array(func(i int) error {
			t.Touches = append(t.Touches, Touch{})
			return t.Touches[i].decodeJSON(r)
		})
	})
}

func (s ScopeArgs) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.raw("scope", s.Scope.appendJSON(nil))
	w.close()
	return w.b
}

func (s *ScopeArgs) decodeJSON(r *reader) error {
	return r.object(func(key string) error {
		if key != "scope" {
			return r.unknown()
		}
		return s.Scope.decodeJSON(r)
	})
}

func (m MembersArgs) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.raw("scope", m.Scope.appendJSON(nil))
	w.strOmit("cursor", m.Cursor)
	w.int("limit", int64(m.Limit))
	w.close()
	return w.b
}

func (m *MembersArgs) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "scope":
			err = m.Scope.decodeJSON(r)
		case "cursor":
			m.Cursor, err = r.str()
		case "limit":
			m.Limit, err = r.int()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (a ActiveWithinArgs) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.raw("scope", a.Scope.appendJSON(nil))
	w.raw("within_ms", a.Within.appendJSON(nil))
	w.close()
	return w.b
}

func (a *ActiveWithinArgs) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "scope":
			err = a.Scope.decodeJSON(r)
		case "within_ms":
			err = a.Within.decodeJSON(r)
		default:
			err = r.unknown()
		}
		return err
	})
}

func (Empty) appendJSON(b []byte) []byte { return append(b, "{}"...) }

func (*Empty) decodeJSON(r *reader) error {
	return r.object(func(key string) error { return r.unknown() })
}

func (x Removed) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.bool("removed", x.Removed)
	w.close()
	return w.b
}

func (x *Removed) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		if key != "removed" {
			return r.unknown()
		}
		x.Removed, err = r.bool()
		return err
	})
}

func (n N) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.int("n", n.N)
	w.close()
	return w.b
}

func (n *N) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		if key != "n" {
			return r.unknown()
		}
		n.N, err = r.int64()
		return err
	})
}

func (c Count) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.int("n", c.N)
	w.int("as_of", c.AsOf)
	w.boolOmit("stale", c.Stale)
	w.close()
	return w.b
}

func (c *Count) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "n":
			c.N, err = r.int64()
		case "as_of":
			c.AsOf, err = r.int64()
		case "stale":
			c.Stale, err = r.bool()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (p MemberPage) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.list("members", len(p.Members), p.Members == nil, func(b []byte, i int) []byte {
		m := writer{b: b}
		m.open()
		m.str("id", p.Members[i].ID)
		m.int("last_seen", p.Members[i].LastSeen)
		m.close()
		return m.b
	})
	w.strOmit("next", p.Next)
	w.close()
	return w.b
}

func (p *MemberPage) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "members":
			if r.null() {
				p.Members = nil
				return nil
			}
			p.Members = []Member{}
			err = r.array(func(i int) error {
				var m Member
				err := r.object(func(key string) (err error) {
					switch key {
					case "id":
						m.ID, err = r.str()
					case "last_seen":
						m.LastSeen, err = r.int64()
					default:
						err = r.unknown()
					}
					return err
				})
				p.Members = append(p.Members, m)
				return err
			})
		case "next":
			p.Next, err = r.str()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (s SweepReport) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.int("buckets", int64(s.Buckets))
	w.int("held", int64(s.Held))
	w.int("visited", int64(s.Visited))
	w.int("removed", int64(s.Removed))
	w.int("released", int64(s.Released))
	w.changes("changes", s.Changes)
	w.int("steps", int64(s.Steps))
	w.raw("duration_ms", s.Duration.appendJSON(nil))
	w.close()
	return w.b
}

func (s *SweepReport) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "buckets":
			s.Buckets, err = r.int()
		case "held":
			s.Held, err = r.int()
		case "visited":
			s.Visited, err = r.int()
		case "removed":
			s.Removed, err = r.int()
		case "released":
			s.Released, err = r.int()
		case "changes":
			s.Changes, err = r.changes()
		case "steps":
			s.Steps, err = r.int()
		case "duration_ms":
			err = s.Duration.decodeJSON(r)
		default:
			err = r.unknown()
		}
		return err
	})
}

func (c Configured) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.int("abi", int64(c.ABI))
	w.str("clock", c.Clock)
	w.close()
	return w.b
}

func (c *Configured) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "abi":
			c.ABI, err = r.int()
		case "clock":
			c.Clock, err = r.str()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (c ChangeLogArgs) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.strOmit("after", c.After)
	w.int("limit", int64(c.Limit))
	w.close()
	return w.b
}

func (c *ChangeLogArgs) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "after":
			c.After, err = r.str()
		case "limit":
			c.Limit, err = r.int()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (c ChangeLog) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.list("entries", len(c.Entries), c.Entries == nil, func(b []byte, i int) []byte {
		e := writer{b: b}
		e.open()
		e.str("id", c.Entries[i].ID)
		e.raw("change", c.Entries[i].Change.appendJSON(nil))
		if k := c.Entries[i].Kick; k != nil {
			e.raw("kick", k.appendJSON(nil))
		}
		e.close()
		return e.b
	})
	w.boolOmit("gap", c.Gap)
	w.close()
	return w.b
}

func (c *ChangeLog) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "entries":
			if r.null() {
				c.Entries = nil
				return nil
			}
			c.Entries = []LoggedChange{}
			err = r.array(func(i int) error {
				var e LoggedChange
				err := r.object(func(key string) (err error) {
					switch key {
					case "id":
						e.ID, err = r.str()
					case "change":
						err = e.Change.decodeJSON(r)
					case "kick":
						if r.null() {
							e.Kick = nil
							return nil
						}
						e.Kick = &Kick{}
						err = e.Kick.decodeJSON(r)
					default:
						err = r.unknown()
					}
					return err
				})
				c.Entries = append(c.Entries, e)
				return err
			})
		case "gap":
			c.Gap, err = r.bool()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (c ScopeClass) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.raw("layout", c.Layout.appendJSON(nil))
	if c.Window != 0 {
		w.raw("window_ms", c.Window.appendJSON(nil))
	}
	w.intOmit("shards", int64(c.Shards))
	w.boolOmit("spread", c.Spread)
	if c.SweepInterval != 0 {
		w.raw("sweep_interval_ms", c.SweepInterval.appendJSON(nil))
	}
	if c.Bucket != 0 {
		w.raw("bucket_ms", c.Bucket.appendJSON(nil))
	}
	w.close()
	return w.b
}

func (c *ScopeClass) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		switch key {
		case "layout":
			err = c.Layout.decodeJSON(r)
		case "window_ms":
			err = c.Window.decodeJSON(r)
		case "shards":
			c.Shards, err = r.int()
		case "spread":
			c.Spread, err = r.bool()
		case "sweep_interval_ms":
			err = c.SweepInterval.decodeJSON(r)
		case "bucket_ms":
			err = c.Bucket.decodeJSON(r)
		default:
			err = r.unknown()
		}
		return err
	})
}

// configDurations lists the duration fields of Config by wire name.
func (c *Config) durations() []struct {
	name string
	d    *Duration
} {
	return []struct {
		name string
		d    *Duration
	}{
		{"idle_after_ms", &c.IdleAfter}, {"push_window_ms", &c.PushWindow}, {"leave_delay_ms", &c.LeaveDelay},
		{"coalesce_window_ms", &c.CoalesceWindow}, {"key_grace_ms", &c.KeyGrace}, {"max_skew_ms", &c.MaxSkew},
		{"kick_fence_ms", &c.KickFence},
		{"sweep_interval_ms", &c.SweepInterval}, {"count_ttl_ms", &c.CountTTL}, {"lock_lease_ms", &c.LockLease},
	}
}

// configInts lists the integer fields of Config by wire name.
func (c *Config) ints() []struct {
	name string
	n    *int
} {
	return []struct {
		name string
		n    *int
	}{
		{"max_devices", &c.MaxDevices}, {"user_buckets", &c.UserBuckets}, {"scope_buckets", &c.ScopeBuckets},
		{"sweep_batch", &c.SweepBatch}, {"sweep_budget", &c.SweepBudget}, {"release_after", &c.ReleaseAfter},
		{"last_good_counts", &c.LastGoodCounts}, {"change_log", &c.ChangeLog},
	}
}

func (c Config) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.strOmit("prefix", c.Prefix)
	if c.Intervals != nil {
		w.key("intervals_ms")
		w.b = appendMap(w.b, sortedKeys(c.Intervals), func(b []byte, k string) []byte { return c.Intervals[k].appendJSON(b) })
	}
	for _, d := range c.durations() {
		if *d.d != 0 {
			w.raw(d.name, d.d.appendJSON(nil))
		}
	}
	for _, n := range c.ints() {
		w.intOmit(n.name, int64(*n.n))
	}
	if c.Policy != 0 {
		w.raw("policy", c.Policy.appendJSON(nil))
	}
	if c.Classes != nil {
		w.key("classes")
		w.b = appendMap(w.b, sortedKeys(c.Classes), func(b []byte, k string) []byte { return c.Classes[k].appendJSON(b) })
	}
	w.strOmit("clock", c.Clock)
	if c.Seed != nil {
		w.str("seed", *c.Seed)
	}
	w.boolOmit("publish", c.Publish)
	w.close()
	return w.b
}

func (c *Config) decodeJSON(r *reader) error {
	return r.object(func(key string) (err error) {
		for _, d := range c.durations() {
			if d.name == key {
				return d.d.decodeJSON(r)
			}
		}
		for _, n := range c.ints() {
			if n.name == key {
				*n.n, err = r.int()
				return err
			}
		}
		switch key {
		case "prefix":
			c.Prefix, err = r.str()
		case "intervals_ms":
			if r.null() {
				c.Intervals = nil
				return nil
			}
			c.Intervals = map[string]Duration{}
			err = r.entries(func(kind string) error {
				var d Duration
				err := d.decodeJSON(r)
				c.Intervals[kind] = d
				return err
			})
		case "policy":
			err = c.Policy.decodeJSON(r)
		case "classes":
			if r.null() {
				c.Classes = nil
				return nil
			}
			c.Classes = map[string]ScopeClass{}
			err = r.entries(func(name string) error {
				var sc ScopeClass
				err := sc.decodeJSON(r)
				c.Classes[name] = sc
				return err
			})
		case "clock":
			c.Clock, err = r.str()
		case "seed":
			if r.null() {
				c.Seed = nil
				return nil
			}
			var s string
			s, err = r.str()
			c.Seed = &s
		case "publish":
			c.Publish, err = r.bool()
		default:
			err = r.unknown()
		}
		return err
	})
}

func (o Online) appendJSON(b []byte) []byte {
	w := writer{b: b}
	w.open()
	w.key("online")
	if o.Online == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '{')
		for i, k := range sortedKeys(o.Online) {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendJSONString(w.b, k)
			w.b = append(w.b, ':')
			w.b = strconv.AppendInt(w.b, o.Online[k], 10)
		}
		w.b = append(w.b, '}')
	}
	w.close()
	return w.b
}

func (o *Online) decodeJSON(r *reader) error {
	return r.object(func(key string) error {
		if key != "online" {
			return r.unknown()
		}
		if r.null() {
			o.Online = nil
			return nil
		}
		o.Online = map[string]int64{}
		return r.object(func(status string) error {
			n, err := r.int64()
			o.Online[strings.Clone(status)] = n
			return err
		})
	})
}
