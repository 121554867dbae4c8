package core

import (
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/presencekit/presence/internal/limits"
)

// checkID applies the ID rule of docs/design.md §3: 1 to limits.IDBytes
// (128) bytes of valid UTF-8 holding no invisible character that would make two IDs
// look alike: no control character (Unicode Cc), no format character (Cf:
// the byte order mark U+FEFF, bidirectional controls, zero-width space…)
// except the zero-width non-joiner and joiner (U+200C, U+200D) between
// two other characters, where scripts and emoji sequences need them, no
// line or paragraph separator (Zl, Zp: U+2028, U+2029), and no white space
// (unicode.IsSpace) at either end.
func checkID(field, id string) error {
	if id == "" {
		return invalid(field, "must not be empty")
	}
	if len(id) > limits.IDBytes {
		return invalid(field, "is %d bytes, at most %d allowed", len(id), limits.IDBytes)
	}
	for i := 0; i < len(id); {
		b := id[i]
		if b < utf8.RuneSelf { // the common case, without decoding
			if b < 0x20 || b == 0x7f {
				return invalid(field, "contains control character %U at byte %d", rune(b), i)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(id[i:])
		if r == utf8.RuneError && size == 1 {
			return invalid(field, "is not valid UTF-8 (byte %d)", i)
		}
		if what := hidden(r); what != "" && !(isJoiner(r) && i > 0 && i+size < len(id)) {
			return invalid(field, "contains %s %U at byte %d", what, r, i)
		}
		i += size
	}
	if r, _ := utf8.DecodeRuneInString(id); unicode.IsSpace(r) {
		return invalid(field, "starts with white space %U", r)
	}
	if r, _ := utf8.DecodeLastRuneInString(id); unicode.IsSpace(r) {
		return invalid(field, "ends with white space %U", r)
	}
	return nil
}

// hidden names the class of an invisible rune that IDs may not hold, or
// returns "".
func hidden(r rune) string {
	switch {
	case unicode.Is(unicode.Cc, r):
		return "control character"
	case unicode.Is(unicode.Cf, r):
		return "invisible format character"
	case unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r):
		return "line or paragraph separator"
	}
	return ""
}

// isJoiner reports the zero-width non-joiner and joiner.
func isJoiner(r rune) bool { return r == '\u200c' || r == '\u200d' }

func checkText(field, s string) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return invalid(field, "is not valid UTF-8 (byte %d)", i)
			}
		}
		if unicode.IsControl(r) {
			return invalid(field, "contains control character %U at byte %d", r, i)
		}
	}
	return nil
}

// checkGateway allows an empty gateway (no routing of kicks).
func checkGateway(field, gw string) error {
	if gw == "" {
		return nil
	}
	return checkID(field, gw)
}

// checkMeta applies the metadata caps of docs/design.md §3.
func checkMeta(field string, m map[string]string) error {
	if len(m) > limits.MetaEntries {
		return invalid(field, "has %d entries, at most %d allowed", len(m), limits.MetaEntries)
	}
	total := 0
	for k, v := range m {
		if k == "" {
			return invalid(field, "has an empty key")
		}
		if err := checkText(field+"[key]", k); err != nil {
			return err
		}
		if err := checkText(field+"["+k+"]", v); err != nil {
			return err
		}
		total += len(k) + len(v)
	}
	if total > limits.MetaBytes {
		return invalid(field, "holds %d bytes, at most %d allowed", total, limits.MetaBytes)
	}
	return nil
}

func checkBatch(field string, n int) error {
	if n < 1 || n > MaxBatch {
		return invalid(field, "has %d items, want 1 to %d", n, MaxBatch)
	}
	return nil
}

func (s *settings) checkScope(field string, sc Scope) (classSettings, error) {
	cs, ok := s.classes[sc.Class]
	if !ok {
		return cs, invalid(field+".Class", "unknown scope class %q", sc.Class)
	}
	return cs, within(field, checkID(".ID", sc.ID))
}

// within prefixes the field that err, an *InputError, names: a field of a
// field, or of a batch's item, is named only once it breaks a rule, so
// that valid input costs no name.
func within(prefix string, err error) error {
	if ie, ok := err.(*InputError); ok {
		ie.Field = prefix + ie.Field
	}
	return err
}

// CheckID applies the ID rule of docs/design.md §3 to id, for services
// that take IDs from outside before they reach the engine: 1 to 128 bytes
// of valid UTF-8 without control characters (Cc), format characters (Cf;
// U+200C and U+200D only between two other characters), line or paragraph
// separators (Zl, Zp), and without white space at either end. It returns
// an *InputError naming field.
func CheckID(field, id string) error { return checkID(field, id) }

// checkTouch checks the arguments of a single touch, naming them as the
// caller wrote them ("scope.Class", "member"), not as a batch's items.
func (s *settings) checkTouch(sc Scope, member string) error {
	if _, err := s.checkScope("scope", sc); err != nil {
		return err
	}
	return checkID("member", member)
}

// checkUsers checks a batch of user IDs.
func checkUsers(users []string) error {
	if err := checkBatch("users", len(users)); err != nil {
		return err
	}
	for i, u := range users {
		if err := checkID("", u); err != nil {
			return within("users["+strconv.Itoa(i)+"]", err)
		}
	}
	return nil
}

// checkEnd checks the arguments of Logout and Disconnect.
func checkEnd(user, device, token string) error {
	if err := checkID("user", user); err != nil {
		return err
	}
	if err := checkID("device", device); err != nil {
		return err
	}
	if token != "" {
		return checkID("token", token)
	}
	return nil
}

// checkManual checks the arguments of SetManual.
func checkManual(user string, m Manual, ttl time.Duration) error {
	if err := checkID("user", user); err != nil {
		return err
	}
	if !m.valid() {
		return invalid("manual", "unknown manual status %d", m)
	}
	if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) {
		return invalid("ttl", "must be 0 (no expiry) or at least 1ms, got %v", ttl)
	}
	return nil
}

// checkHeartbeat applies the input rules to a heartbeat before anything is sent.
func (*planner) checkHeartbeat(hb Heartbeat) error {
	if err := checkID("Heartbeat.User", hb.User); err != nil {
		return err
	}
	if err := checkID("Heartbeat.Device", hb.Device); err != nil {
		return err
	}
	if !hb.Kind.valid() {
		return invalid("Heartbeat.Kind", "unknown kind %d", hb.Kind)
	}
	if err := checkGateway("Heartbeat.Gateway", hb.Gateway); err != nil {
		return err
	}
	if hb.Token != "" {
		if err := checkID("Heartbeat.Token", hb.Token); err != nil {
			return err
		}
	}
	if y := hb.At.Year(); !hb.At.IsZero() && (y < -290_000_000 || y > 290_000_000) {
		// milliseconds since the epoch wrap past ±292 million years, so an
		// instant that far away could land near now: refuse it as skewed
		return ErrClockSkew
	}
	return checkMeta("Heartbeat.Meta", hb.Meta)
}

// checkLogin applies the input rules to a login under policy p.
func (*planner) checkLogin(l Login, p Policy) error {
	if err := checkID("Login.User", l.User); err != nil {
		return err
	}
	if err := checkID("Login.Device", l.Device); err != nil {
		return err
	}
	if !l.Kind.valid() {
		return invalid("Login.Kind", "unknown kind %d", l.Kind)
	}
	if !p.valid() {
		return invalid("Login.Policy", "unknown policy %d", p)
	}
	if err := checkGateway("Login.Gateway", l.Gateway); err != nil {
		return err
	}
	if l.Token != "" {
		if err := checkID("Login.Token", l.Token); err != nil {
			return err
		}
	}
	return checkMeta("Login.Meta", l.Meta)
}
