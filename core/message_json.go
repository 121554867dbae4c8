package core

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file writes and reads the JSON of changeMessage and kickMessage by
// hand, byte for byte as encoding/json's Marshal and Unmarshal do (the
// tests compare them, and fuzz them against each other), so that the
// core, and the WebAssembly builds with it, need neither encoding/json
// nor the reflection it runs on.

// appendJSONString appends s as a JSON string, as encoding/json writes it:
// '<', '>', '&', U+2028 and U+2029 escaped, and each byte of invalid UTF-8
// as \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSON appends m as encoding/json marshals it.
func (m changeMessage) appendJSON(b []byte) []byte {
	b = append(b, `{"user":`...)
	b = appendJSONString(b, m.User)
	b = append(b, `,"from":`...)
	b = appendJSONString(b, m.From)
	b = append(b, `,"to":`...)
	b = appendJSONString(b, m.To)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, m.At, 10)
	return appendID(b, m.ID)
}

// appendID ends a message with its outbox ID, when it has one.
func appendID(b []byte, id string) []byte {
	if id != "" {
		b = append(b, `,"id":`...)
		b = appendJSONString(b, id)
	}
	return append(b, '}')
}

// appendJSON appends m as encoding/json marshals it.
func (m kickMessage) appendJSON(b []byte) []byte {
	b = append(b, `{"user":`...)
	b = appendJSONString(b, m.User)
	b = append(b, `,"device":`...)
	b = appendJSONString(b, m.Device)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, m.Kind)
	if m.Gateway != "" {
		b = append(b, `,"gateway":`...)
		b = appendJSONString(b, m.Gateway)
	}
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, m.At, 10)
	return appendID(b, m.ID)
}

// appendJSON appends m as encoding/json marshals it.
func (m lossMessage) appendJSON(b []byte) []byte {
	b = append(b, `{"event":`...)
	b = appendJSONString(b, m.Event)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, m.At, 10)
	b = append(b, `,"until":`...)
	b = strconv.AppendInt(b, m.Until, 10)
	return appendID(b, m.ID)
}

// decodeJSON decodes b into m, and into more, fields besides m's: those of
// a loss's message, which shares ChangeChannel (unmarshalChannelMessage).
func (m *changeMessage) decodeJSON(b []byte, more ...jsonField) error {
	return decodeJSONObject(b, append([]jsonField{
		{name: "USER", str: &m.User}, {name: "FROM", str: &m.From}, {name: "TO", str: &m.To}, {name: "AT", num: &m.At},
		{name: "ID", str: &m.ID},
	}, more...))
}

func (m *kickMessage) decodeJSON(b []byte) error {
	return decodeJSONObject(b, []jsonField{
		{name: "USER", str: &m.User}, {name: "DEVICE", str: &m.Device}, {name: "KIND", str: &m.Kind},
		{name: "GATEWAY", str: &m.Gateway}, {name: "AT", num: &m.At}, {name: "ID", str: &m.ID},
	})
}

// jsonField is a field of a struct of strings and int64s, as
// decodeJSONObject fills it.
type jsonField struct {
	name string // the JSON name, in upper case (see jsonFold)
	str  *string
	num  *int64
}

// maxJSONDepth is encoding/json's limit of nested objects and arrays.
const maxJSONDepth = 10000

var (
	errJSONSyntax = errors.New("malformed JSON")
	errJSONType   = errors.New("JSON value of the wrong type")
)

// decodeJSONObject decodes b into fields as encoding/json's Unmarshal
// decodes into a struct of them: the input must be one valid JSON value;
// null leaves the fields as they are; an object sets the field each key
// names (exactly or folded, as encoding/json matches names), the last of
// duplicates winning, null values leaving a field as it is, and other
// keys skipped; a string field takes a string, an int64 field a number
// that is a whole int64; anything else is an error.
func decodeJSONObject(b []byte, fields []jsonField) error {
	d := &jsonDecoder{b: b, fields: fields}
	d.value(nil, true)
	d.space()
	if d.err == nil && d.i != len(b) {
		d.err = errJSONSyntax
	}
	if d.err != nil {
		return d.err
	}
	if d.typeErr {
		return errJSONType
	}
	return nil
}

type jsonDecoder struct {
	b       []byte
	i       int
	depth   int
	fields  []jsonField
	err     error // syntax
	typeErr bool  // a value of the wrong type (reported after the syntax)
}

func (d *jsonDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDecoder) fail() {
	if d.err == nil {
		d.err = errJSONSyntax
	}
	d.i = len(d.b)
}

// value reads one value into f (nil: skip it), or into the fields when
// top is set.
func (d *jsonDecoder) value(f *jsonField, top bool) {
	d.space()
	if d.i >= len(d.b) {
		d.fail()
		return
	}
	switch c := d.b[d.i]; {
	case c == '{':
		if !d.push() {
			return
		}
		if f != nil {
			d.typeErr = true
		}
		d.i++
		d.space()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			d.depth--
			return
		}
		for d.err == nil {
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != '"' {
				d.fail()
				return
			}
			key, ok := d.str(top)
			if !ok {
				return
			}
			var field *jsonField
			if top {
				field = d.field(key)
			}
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				d.fail()
				return
			}
			d.i++
			d.value(field, false)
			if d.err != nil {
				return
			}
			d.space()
			if d.i < len(d.b) && d.b[d.i] == ',' {
				d.i++
				continue
			}
			if d.i < len(d.b) && d.b[d.i] == '}' {
				d.i++
				d.depth--
				return
			}
			d.fail()
		}
	case c == '[':
		if !d.push() {
			return
		}
		if f != nil || top {
			d.typeErr = true
		}
		d.i++
		d.space()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			d.depth--
			return
		}
		for d.err == nil {
			d.value(nil, false)
			if d.err != nil {
				return
			}
			d.space()
			if d.i < len(d.b) && d.b[d.i] == ',' {
				d.i++
				continue
			}
			if d.i < len(d.b) && d.b[d.i] == ']' {
				d.i++
				d.depth--
				return
			}
			d.fail()
		}
	case c == '"':
		s, ok := d.str(f != nil && f.str != nil)
		switch {
		case !ok:
		case top || f != nil && f.str == nil:
			d.typeErr = true
		case f != nil:
			*f.str = s
		}
	case c == 't' || c == 'f' || c == 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
			d.fail()
			return
		}
		d.i += len(lit)
		if c != 'n' && (top || f != nil) {
			d.typeErr = true
		}
	case c == '-' || '0' <= c && c <= '9':
		start := d.i
		if !d.number() {
			d.fail()
			return
		}
		switch {
		case top || f != nil && f.num == nil:
			d.typeErr = true
		case f != nil:
			n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
			if err != nil {
				d.typeErr = true
			} else {
				*f.num = n
			}
		}
	default:
		d.fail()
	}
}

// push enters an object or array.
func (d *jsonDecoder) push() bool {
	d.depth++
	if d.depth > maxJSONDepth {
		d.fail()
		return false
	}
	return true
}

// number reads a number as JSON spells it.
func (d *jsonDecoder) number() bool {
	b, i := d.b, d.i
	digits := func() bool {
		j := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	d.i = i
	return true
}

// str reads a string at d.i (its opening quote), and decodes it when
// decode is set, as encoding/json does: escapes resolved, a lone or
// mismatched surrogate escape and each byte of invalid UTF-8 read as
// U+FFFD.
func (d *jsonDecoder) str(decode bool) (string, bool) {
	b := d.b
	i := d.i + 1
	var out []byte
	plain := true // no escape and valid UTF-8 so far: b[d.i+1:i] is the string
	for {
		if i >= len(b) {
			d.fail()
			return "", false
		}
		c := b[i]
		switch {
		case c == '"':
			s := ""
			if decode {
				if plain {
					s = string(b[d.i+1 : i])
				} else {
					s = string(out)
				}
			}
			d.i = i + 1
			return s, true
		case c < 0x20:
			d.fail()
			return "", false
		case c == '\\':
			if plain && decode {
				out = append(out, b[d.i+1:i]...)
			}
			plain = false
			if i+1 >= len(b) {
				d.fail()
				return "", false
			}
			e := b[i+1]
			i += 2
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
				r := hex4(b, i)
				if r < 0 {
					d.fail()
					return "", false
				}
				i += 4
				if utf16.IsSurrogate(r) {
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						if r2 := hex4(b, i+2); r2 >= 0 {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								out = utf8.AppendRune(out, dec)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				d.fail()
				return "", false
			}
		case c < utf8.RuneSelf:
			if !plain {
				out = append(out, c)
			}
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				if plain && decode {
					out = append(out, b[d.i+1:i]...)
				}
				plain = false
			}
			if !plain {
				out = utf8.AppendRune(out, r)
			}
			i += size
		}
	}
}

// hex4 reads 4 hex digits at b[i:], -1 if there are none.
func hex4(b []byte, i int) rune {
	if len(b)-i < 4 {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// field returns the field key names, nil if none: as encoding/json
// matches a key, exactly or else folded (jsonFold).
func (d *jsonDecoder) field(key string) *jsonField {
	folded, ok := jsonFold(key)
	if !ok {
		return nil
	}
	for i := range d.fields {
		if d.fields[i].name == folded {
			return &d.fields[i]
		}
	}
	return nil
}

// jsonFold folds key as encoding/json folds names for matching, for names
// of ASCII letters: ASCII in upper case, and U+017F (ſ) and U+212A (K),
// whose folds include 's' and 'k', as 'S' and 'K'. Any other non-ASCII
// character folds to one that no such name holds: ok is false.
func jsonFold(key string) (string, bool) {
	var b []byte
	for _, r := range key {
		switch {
		case r >= utf8.RuneSelf:
			switch r {
			case '\u017f':
				r = 'S'
			case '\u212a':
				r = 'K'
			default:
				return "", false
			}
		case 'a' <= r && r <= 'z':
			r -= 'a' - 'A'
		}
		b = append(b, byte(r))
	}
	return string(b), true
}
