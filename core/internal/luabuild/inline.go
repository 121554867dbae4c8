// Package luabuild builds the Lua scripts of package core as Redis runs
// them, from the files of core/lua: the helper files a script builds on
// and the script, joined, with their named constants written as numbers
// (Inline). go generate ./core writes the result into
// internal/luascripts/scripts_gen.go (Generate), so that an engine takes
// its scripts and their SHA1s as they are, without building them.
//
// The statuses, manual statuses, kinds, policies and layouts are defined
// once, in core/status.go (Enums reads them): the scripts take their
// numbers from there (LuaConsts), and so do the dashboard's module
// (JavaScript) and the browser client's TypeScript declarations
// (TypeScript).
package luabuild

import (
	"strconv"
	"strings"
)

// Def parses the definition of a named constant of a Lua file: a
// top-level local in capitals whose value is a whole number, a string in
// single quotes, another such constant, or one plus a number ("local
// ARG_USER = ARG_OWN + 1"), with nothing after it but spaces and a
// comment. It returns the constant's name and either its value (num: the
// number, or the string with its quotes) or the constant and the number
// it adds to (plus is "" when it adds none). It matches what the regular
// expression
//
//	^local ([A-Z][A-Z0-9_]*) = (\d+|'(?:[^'\\\n]|\\[^\n])*'|([A-Z][A-Z0-9_]*)(?: \+ (\d+))?)\s*(?:--.*)?$
//
// matches (TestDef checks it against it).
func Def(line string) (name, num, base, plus string, ok bool) {
	rest, ok := strings.CutPrefix(line, "local ")
	if !ok {
		return "", "", "", "", false
	}
	if name, rest = luaConstName(rest); name == "" {
		return "", "", "", "", false
	}
	if rest, ok = strings.CutPrefix(rest, " = "); !ok {
		return "", "", "", "", false
	}
	if num, rest = luaDigits(rest); num != "" {
		return name, num, "", "", luaLineEnd(rest)
	}
	if num, rest = luaQuoted(rest); num != "" {
		return name, num, "", "", luaLineEnd(rest)
	}
	if base, rest = luaConstName(rest); base == "" {
		return "", "", "", "", false
	}
	if r, ok := strings.CutPrefix(rest, " + "); ok {
		if plus, r = luaDigits(r); plus != "" && luaLineEnd(r) {
			return name, "", base, plus, true
		}
	}
	return name, "", base, "", luaLineEnd(rest)
}

// luaConstName splits s after a leading [A-Z][A-Z0-9_]*; name is "" if s
// does not start with one.
func luaConstName(s string) (name, rest string) {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return "", s
	}
	i := 1
	for i < len(s) && (s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
		i++
	}
	return s[:i], s[i:]
}

// luaQuoted splits s after a leading string in single quotes, in which a
// backslash escapes the next character; quoted is "" if s does not start
// with one or it does not end on the line.
func luaQuoted(s string) (quoted, rest string) {
	if s == "" || s[0] != '\'' {
		return "", s
	}
	for i := 1; i < len(s) && s[i] != '\n'; i++ {
		switch s[i] {
		case '\\':
			i++
		case '\'':
			return s[:i+1], s[i+1:]
		}
	}
	return "", s
}

// luaDigits splits s after its leading ASCII digits.
func luaDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i], s[i:]
}

// luaLineEnd reports whether s is spaces ([\t\n\f\r ]) and then nothing
// or a comment running to the end (no newline).
func luaLineEnd(s string) bool {
	s = strings.TrimLeft(s, "\t\n\f\r ")
	return s == "" || strings.HasPrefix(s, "--") && !strings.Contains(s, "\n")
}

// Inline writes every use of a named constant in src as its value: the
// constants of core (LuaConsts: the statuses, manual statuses, kinds,
// policies and layouts, named as in Go, which no Lua file defines) and those src defines
// (Def), whose definitions it blanks, keeping the lines where they were.
// The scripts name their ARGV positions and the other numbers and
// separators they share with the engine once, as such constants, but a
// local costs a script an instruction on every call and each function that
// reads it an upvalue, which every call that defines the function pays for
// (a closure is made again on every call, an upvalue each): the script
// sent holds the values instead. A constant defined again (a scope
// script's own ARG_NOW after userlib.lua's) applies from its definition
// on, as a Lua local does. A definition of one of core's constants, or a
// constant defined from one not yet defined, panics, so that go generate
// ./core stops there.
func Inline(src string, core map[string]string) string {
	values := make(map[string]string, len(core))
	for k, v := range core {
		values[k] = v
	}
	lines := strings.SplitAfter(src, "\n")
	for i, line := range lines {
		body := strings.TrimSuffix(line, "\n")
		if name, num, base, plus, ok := Def(body); ok {
			if _, ok := core[name]; ok {
				panic("presence: Lua constant " + name + " is core's (" + TableFile + "): use it without defining it")
			}
			v := num
			if base != "" {
				bv, ok := values[base]
				if !ok {
					panic("presence: Lua constant " + name + " uses " + base + " before its definition")
				}
				v = bv
				if plus != "" {
					a, _ := strconv.Atoi(bv)
					b, _ := strconv.Atoi(plus)
					v = strconv.Itoa(a + b)
				}
			}
			values[name] = v
			lines[i] = line[len(body):]
			continue
		}
		lines[i] = inlineLine(line, values)
	}
	return strings.Join(lines, "")
}

// inlineLine replaces the names of values in one line of Lua code, outside
// its strings and its comment.
func inlineLine(line string, values map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '-' && strings.HasPrefix(line[i:], "--"):
			b.WriteString(line[i:])
			return b.String()
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(line) && line[j] != c {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(line))
			b.WriteString(line[i:j])
			i = j
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i
			for j < len(line) && (line[j] == '_' || 'a' <= line[j] && line[j] <= 'z' ||
				'A' <= line[j] && line[j] <= 'Z' || '0' <= line[j] && line[j] <= '9') {
				j++
			}
			if v, ok := values[line[i:j]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(line[i:j])
			}
			i = j
		case '0' <= c && c <= '9':
			// a number, hexadecimal or with an exponent: no name starts in it
			j := i
			for j < len(line) && (line[j] == '.' || '0' <= line[j] && line[j] <= '9' ||
				'a' <= line[j] && line[j] <= 'z' || 'A' <= line[j] && line[j] <= 'Z') {
				j++
			}
			b.WriteString(line[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}
