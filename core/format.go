package core

import (
	"strconv"
	"strings"
)

// This file formats the core's error messages as package fmt would, for
// the verbs and argument types they use (TestSprintfCallSites checks every
// call), so that the core does not link fmt, and reflect with it, into
// the WebAssembly builds.

// sprintf formats as fmt.Sprintf does, for the verbs %d, %s, %q, %v, %U
// and %% and the argument types the core passes them: integers of every
// core type, strings, byte slices, errors and Stringers.
func sprintf(format string, args ...any) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		verb := format[i]
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if n >= len(args) {
			b.WriteString("%!" + string(verb) + "(MISSING)")
			continue
		}
		b.WriteString(formatArg(verb, args[n]))
		n++
	}
	if n < len(args) {
		b.WriteString("%!(EXTRA)")
	}
	return b.String()
}

// formatArg formats one argument as fmt does with verb.
func formatArg(verb byte, a any) string {
	if i, ok := asInt(a); ok && (verb == 'd' || verb == 'v' && isPlainInt(a)) {
		return strconv.FormatInt(i, 10)
	}
	switch verb {
	case 'U':
		if r, ok := a.(rune); ok {
			s := strings.ToUpper(strconv.FormatInt(int64(r), 16))
			for len(s) < 4 {
				s = "0" + s
			}
			return "U+" + s
		}
	case 'q':
		if s, ok := a.(string); ok {
			return strconv.Quote(s)
		}
	case 's', 'v':
		switch v := a.(type) {
		case nil:
			if verb == 'v' {
				return "<nil>"
			}
		case error:
			return v.Error()
		case interface{ String() string }:
			return v.String()
		case string:
			return v
		case []byte:
			if verb == 's' {
				return string(v)
			}
		}
	}
	return "%!" + string(verb) + "(unsupported)"
}

// asInt returns the integer a, of any integer type the core formats.
func asInt(a any) (int64, bool) {
	switch v := a.(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint8:
		return int64(v), true
	case Kind:
		return int64(v), true
	case Policy:
		return int64(v), true
	case Layout:
		return int64(v), true
	case Manual:
		return int64(v), true
	case Status:
		return int64(v), true
	}
	return 0, false
}

// isPlainInt reports whether a is an integer without a String method,
// which %v formats as a number.
func isPlainInt(a any) bool {
	_, stringer := a.(interface{ String() string })
	return !stringer
}

// wrapError is what fmt.Errorf returns for one %w: its message, and the
// error it wraps.
type wrapError struct {
	msg string
	err error
}

func (e *wrapError) Error() string { return e.msg }
func (e *wrapError) Unwrap() error { return e.err }

// wrapErrors is what fmt.Errorf returns for several %w.
type wrapErrors struct {
	msg  string
	errs []error
}

func (e *wrapErrors) Error() string   { return e.msg }
func (e *wrapErrors) Unwrap() []error { return e.errs }
