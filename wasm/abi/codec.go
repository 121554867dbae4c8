package abi

import (
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The codec reads and writes the ABI's JSON without reflection:
// encoding/json is slow where Go runs as WebAssembly, and the ABI wants
// stricter reading than it offers (no duplicate keys, exact key names,
// integers without fractions) and byte-exact strings ({"b":…}).

// maxDepth bounds the nesting of any message.
const maxDepth = 64

// reader is a strict JSON pull parser over one message.
type reader struct {
	b        []byte
	i        int
	what     string
	errDepth int
	path     []pathElem // where the reader is, for error messages
	seen     []string   // the keys of the objects being read, innermost last
}

// pathElem is a key of an object, or an index of an array when key is "".
type pathElem struct {
	key   string
	index int
}

func newReader(what string, b []byte) *reader {
	return &reader{b: b, what: what, path: make([]pathElem, 0, 8), seen: make([]string, 0, 32)}
}

// field renders the reader's position, such as "args.beats[2].kind".
func (r *reader) field() string { return fieldOf(r.path) }

// fieldOf renders a path, such as "args.beats[2].kind".
func fieldOf(path []pathElem) string {
	var s []byte
	for _, e := range path {
		if e.key == "" {
			s = append(s, '[')
			s = strconv.AppendInt(s, int64(e.index), 10)
			s = append(s, ']')
			continue
		}
		if len(s) > 0 {
			s = append(s, '.')
		}
		s = append(s, e.key...)
	}
	return string(s)
}

func (r *reader) fail(reason string) error {
	return &DecodeError{What: r.what, Field: r.field(), Reason: reason}
}

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (r *reader) peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

func (r *reader) want(c byte) error {
	if r.peek() != c {
		return r.unexpected("'" + string(c) + "'")
	}
	r.i++
	return nil
}

func (r *reader) unexpected(want string) error {
	if r.i >= len(r.b) {
		return r.fail("truncated JSON: want " + want)
	}
	return r.fail("want " + want + " at byte " + strconv.Itoa(r.i) + ", got " + strconv.QuoteRune(rune(r.b[r.i])))
}

// end checks that nothing but white space follows the message.
func (r *reader) end() error {
	if r.peek() != 0 {
		return r.fail("trailing data after the object at byte " + strconv.Itoa(r.i))
	}
	return nil
}

// null consumes a null if one is next.
func (r *reader) null() bool {
	if r.peek() == 'n' && r.i+4 <= len(r.b) && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

// object reads an object, calling each with every key; each consumes the
// value. A key may appear once.
func (r *reader) object(each func(key string) error) error {
	if err := r.want('{'); err != nil {
		return err
	}
	if len(r.path) > maxDepth {
		return r.fail("nested too deep")
	}
	if r.peek() == '}' {
		r.i++
		return nil
	}
	base := len(r.seen) // this object's keys are r.seen[base:]
	defer func() { r.seen = r.seen[:base] }()
	var seenMap map[string]bool
	r.path = append(r.path, pathElem{})
	top := len(r.path) - 1
	for {
		if r.peek() != '"' {
			return r.unexpected("a key")
		}
		key, err := r.view()
		if err != nil {
			return err
		}
		r.path[top].key = key
		if seenMap != nil {
			if seenMap[key] {
				return r.fail("duplicate key")
			}
			seenMap[key] = true
		} else {
			for _, k := range r.seen[base:] {
				if k == key {
					return r.fail("duplicate key")
				}
			}
			if len(r.seen)-base == 16 {
				// many keys (a large metadata map): look them up in a map
				seenMap = make(map[string]bool, 32)
				for _, k := range r.seen[base:] {
					seenMap[k] = true
				}
				seenMap[key] = true
			} else {
				r.seen = append(r.seen, key)
			}
		}
		if err := r.want(':'); err != nil {
			return err
		}
		if err := each(key); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			r.path = r.path[:top]
			return nil
		default:
			return r.unexpected("',' or '}'")
		}
	}
}

// array reads an array, calling each for every element.
func (r *reader) array(each func(i int) error) error {
	if err := r.want('['); err != nil {
		return err
	}
	if len(r.path) > maxDepth {
		return r.fail("nested too deep")
	}
	if r.peek() == ']' {
		r.i++
		return nil
	}
	r.path = append(r.path, pathElem{})
	top := len(r.path) - 1
	for n := 0; ; n++ {
		r.path[top].index = n
		if err := each(n); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			r.path = r.path[:top]
			return nil
		default:
			return r.unexpected("',' or ']'")
		}
	}
}

// unknown reports a key the type does not have.
func (r *reader) unknown() error { return r.fail("unknown field") }

// str reads a string: a JSON string, {"b":"<base64>"} for bytes that are
// not UTF-8, or null for "".
func (r *reader) str() (string, error) {
	switch r.peek() {
	case '"':
		return r.text()
	case '{':
		var s string
		var got bool
		err := r.object(func(key string) error {
			if key != "b" {
				return r.unknown()
			}
			t, err := r.text()
			if err != nil {
				return err
			}
			raw, err := base64.StdEncoding.DecodeString(t)
			if err != nil {
				return r.fail("invalid base64")
			}
			s, got = string(raw), true
			return nil
		})
		if err == nil && !got {
			err = r.fail(`want {"b":"<base64>"}`)
		}
		return s, err
	}
	if r.null() {
		return "", nil
	}
	return "", r.unexpected("a string")
}

// view reads a JSON string literal like text, but without copying it when
// it has no escapes: the result shares the message's memory, so it is
// valid only as long as the message is, and must be cloned to be kept.
// Keys and enumeration names are read this way.
func (r *reader) view() (string, error) {
	if r.peek() == '"' {
		for j := r.i + 1; j < len(r.b); j++ {
			c := r.b[j]
			if c == '"' {
				s := unsafe.String(unsafe.SliceData(r.b[r.i+1:j]), j-r.i-1)
				if j == r.i+1 {
					s = ""
				}
				r.i = j + 1
				return s, nil
			}
			if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
				break
			}
		}
	}
	return r.text()
}

// text reads a JSON string literal. The input must be UTF-8; escapes of
// lone surrogates read as U+FFFD.
func (r *reader) text() (string, error) {
	if err := r.want('"'); err != nil {
		return "", err
	}
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			s := string(r.b[start:r.i])
			r.i++
			return s, nil
		case c == '\\':
			return r.escaped(start)
		case c < 0x20:
			return "", r.fail("control character in a string")
		case c < utf8.RuneSelf:
			r.i++
		default:
			ru, size := utf8.DecodeRune(r.b[r.i:])
			if ru == utf8.RuneError && size <= 1 {
				return "", r.fail("invalid UTF-8 in a string")
			}
			r.i += size
		}
	}
	return "", r.fail("truncated JSON: unterminated string")
}

// escaped finishes a string literal that has escapes, from start.
func (r *reader) escaped(start int) (string, error) {
	out := append([]byte(nil), r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return string(out), nil
		case c == '\\':
			if r.i+1 >= len(r.b) {
				return "", r.fail("truncated JSON: unterminated string")
			}
			e := r.b[r.i+1]
			r.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				ru, ok := r.hex4()
				if !ok {
					return "", r.fail("invalid \\u escape")
				}
				if utf16.IsSurrogate(ru) {
					ru2 := rune(-1)
					if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
						save := r.i
						r.i += 2
						if ru2, ok = r.hex4(); !ok {
							return "", r.fail("invalid \\u escape")
						}
						if d := utf16.DecodeRune(ru, ru2); d != utf8.RuneError {
							ru = d
						} else {
							r.i, ru = save, utf8.RuneError
						}
					} else {
						ru = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, ru)
			default:
				return "", r.fail("invalid escape \\" + string(e))
			}
		case c < 0x20:
			return "", r.fail("control character in a string")
		case c < utf8.RuneSelf:
			out = append(out, c)
			r.i++
		default:
			ru, size := utf8.DecodeRune(r.b[r.i:])
			if ru == utf8.RuneError && size <= 1 {
				return "", r.fail("invalid UTF-8 in a string")
			}
			out = append(out, r.b[r.i:r.i+size]...)
			r.i += size
		}
	}
	return "", r.fail("truncated JSON: unterminated string")
}

func (r *reader) hex4() (rune, bool) {
	if r.i+4 > len(r.b) {
		return 0, false
	}
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			v |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	r.i += 4
	return v, true
}

// number reads a JSON number literal and reports whether it is an integer
// (no fraction, no exponent).
func (r *reader) number() (lit string, integer bool, err error) {
	r.ws()
	start := r.i
	if r.i < len(r.b) && r.b[r.i] == '-' {
		r.i++
	}
	if r.i < len(r.b) && r.b[r.i] == '0' {
		r.i++
	} else if r.digits() == 0 {
		r.i = start
		return "", false, r.unexpected("a number")
	}
	integer = true
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		integer = false
		if r.digits() == 0 {
			return "", false, r.fail("invalid number")
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		integer = false
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if r.digits() == 0 {
			return "", false, r.fail("invalid number")
		}
	}
	return string(r.b[start:r.i]), integer, nil
}

// digits skips decimal digits and returns how many.
func (r *reader) digits() int {
	start := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
	}
	return r.i - start
}

// int64 reads an integer (null reads as 0).
func (r *reader) int64() (int64, error) {
	if r.null() {
		return 0, nil
	}
	lit, integer, err := r.number()
	if err != nil {
		return 0, err
	}
	if !integer {
		return 0, r.fail("want an integer, got " + truncate(lit))
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		return 0, r.fail("integer out of range: " + truncate(lit))
	}
	return n, nil
}

// int reads an integer of Go's int range, which the ABI bounds to int32.
func (r *reader) int() (int, error) {
	n, err := r.int64()
	if err == nil && (n > 1<<31-1 || n < -1<<31) {
		return 0, r.fail("integer out of range")
	}
	return int(n), err
}

// bool reads true or false (null reads as false).
func (r *reader) bool() (bool, error) {
	r.ws()
	switch {
	case r.null():
		return false, nil
	case r.i+4 <= len(r.b) && string(r.b[r.i:r.i+4]) == "true":
		r.i += 4
		return true, nil
	case r.i+5 <= len(r.b) && string(r.b[r.i:r.i+5]) == "false":
		r.i += 5
		return false, nil
	}
	return false, r.unexpected("true or false")
}

// skip reads over any one value, checking its syntax.
func (r *reader) skip() error {
	switch c := r.peek(); {
	case c == '{':
		return r.object(func(string) error { return r.skip() })
	case c == '[':
		return r.array(func(int) error { return r.skip() })
	case c == '"':
		_, err := r.text()
		return err
	case c == 't' || c == 'f':
		_, err := r.bool()
		return err
	case r.null():
		return nil
	}
	_, _, err := r.number()
	return err
}

// strs reads an array of strings; null reads as nil, [] as empty.
func (r *reader) strs() ([]string, error) {
	if r.null() {
		return nil, nil
	}
	out := []string{}
	err := r.array(func(int) error {
		s, err := r.str()
		out = append(out, s)
		return err
	})
	return out, err
}

// strMap reads a map of strings (see entries); null reads as nil, {} as
// empty.
func (r *reader) strMap() (map[string]string, error) {
	if r.null() {
		return nil, nil
	}
	out := map[string]string{}
	err := r.entries(func(key string) error {
		s, err := r.str()
		out[key] = s
		return err
	})
	return out, err
}

// entries reads a map: an object, or, when a key is not UTF-8 (which a
// JSON key cannot hold), an array of [key, value] pairs whose keys are
// strings in either form. each gets every key, which it may keep, and
// reads its value. A key may appear once.
func (r *reader) entries(each func(key string) error) error {
	if r.peek() != '[' {
		return r.object(func(key string) error { return each(strings.Clone(key)) })
	}
	seen := map[string]bool{}
	return r.array(func(int) error {
		if err := r.want('['); err != nil {
			return err
		}
		key, err := r.str()
		if err != nil {
			return err
		}
		if seen[key] {
			return r.fail("duplicate key")
		}
		seen[key] = true
		if err := r.want(','); err != nil {
			return err
		}
		if err := each(key); err != nil {
			return err
		}
		return r.want(']')
	})
}

// writer builds one JSON object.
type writer struct {
	b     []byte
	first bool
}

func (w *writer) open() { w.b, w.first = append(w.b, '{'), true }

func (w *writer) close() { w.b = append(w.b, '}') }

func (w *writer) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *writer) str(k, v string) {
	w.key(k)
	w.b = appendString(w.b, v)
}

func (w *writer) strOmit(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *writer) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *writer) intOmit(k string, v int64) {
	if v != 0 {
		w.int(k, v)
	}
}

func (w *writer) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *writer) boolOmit(k string, v bool) {
	if v {
		w.bool(k, v)
	}
}

// raw writes a value already in JSON.
func (w *writer) raw(k string, v []byte) {
	w.key(k)
	w.b = append(w.b, v...)
}

func (w *writer) strMap(k string, m map[string]string) {
	w.key(k)
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = appendStrMap(w.b, m)
}

func appendStrMap(b []byte, m map[string]string) []byte {
	return appendMap(b, sortedKeys(m), func(b []byte, k string) []byte { return appendString(b, m[k]) })
}

// appendMap writes a map with the given keys, in order: an object, or an
// array of [key, value] pairs when a key is not UTF-8.
func appendMap(b []byte, keys []string, value func(b []byte, k string) []byte) []byte {
	pairs := false
	for _, k := range keys {
		pairs = pairs || !utf8.ValidString(k)
	}
	if pairs {
		b = append(b, '[')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = appendString(b, k)
			b = append(b, ',')
			b = value(b, k)
			b = append(b, ']')
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = value(b, k)
	}
	return append(b, '}')
}

func (w *writer) strs(k string, ss []string) {
	w.key(k)
	if ss == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = appendStrings(w.b, ss)
}

// list writes a JSON array of n items, null when isNil.
func (w *writer) list(k string, n int, isNil bool, item func(b []byte, i int) []byte) {
	w.key(k)
	if isNil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = item(w.b, i)
	}
	w.b = append(w.b, ']')
}

// intMap writes a map of integers as an object, null when nil. Its keys
// are status names or numbers, so never need the [key, value] form.
func (w *writer) intMap(k string, m map[string]int64) {
	w.key(k)
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '{')
	for i, key := range sortedKeys(m) {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendJSONString(w.b, key)
		w.b = append(w.b, ':')
		w.b = strconv.AppendInt(w.b, m[key], 10)
	}
	w.b = append(w.b, '}')
}

// intMap reads an object of integers; null reads as nil, {} as empty.
func (r *reader) intMap() (map[string]int64, error) {
	if r.null() {
		return nil, nil
	}
	out := map[string]int64{}
	err := r.object(func(key string) error {
		n, err := r.int64()
		out[strings.Clone(key)] = n
		return err
	})
	return out, err
}
