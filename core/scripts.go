package core

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strconv"
	"strings"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// Script is one Lua script with its SHA1, as EVALSHA names it.
type Script struct {
	name   string
	source string
	sha    string
}

// Name returns the name the engine's tools know the script by: its file's
// name without ".lua", but "beat" for heartbeat_steady.lua and "heartbeat"
// for heartbeat_full.lua, the names tests and tools look the two up by.
func (s *Script) Name() string { return s.name }

// Source returns the full source sent by EVAL.
func (s *Script) Source() string { return s.source }

// SHA returns the hex SHA1 of the source, as EVALSHA takes it.
func (s *Script) SHA() string { return s.sha }

// scriptSet holds every script of the engine. Scripts that share helpers get
// recordlib.lua, userlib.lua (and scopelib.lua) prepended, so each is
// self-contained; the steady beat gets recordlib.lua alone, because whatever
// a prepended file defines, the script builds on every call.
type scriptSet struct {
	beat, heartbeat, login, logout, manual, status, sweepUsers, unlock *Script
	touch, leave, count, members, active, sweepScopes                  *Script
	logAppend, logRead, outboxAck                                      *Script
	shardTouch, shardLen, shardSweep, shardDrop, scopeFinish           *Script
	counts, ping                                                       *Script

	bySHA map[string]*Script
}

// loadScript joins the helper files libs and the script file, each named
// without ".lua", into one script named after its file, its named
// constants written as numbers (inlineConstants).
func loadScript(file string, libs ...string) *Script {
	src := inlineConstants(joinLua(append(libs, file)...))
	sum := sha1.Sum([]byte(src))
	return &Script{name: file, source: src, sha: hex.EncodeToString(sum[:])}
}

// joinLua joins the embedded files, each named without ".lua".
func joinLua(files ...string) string {
	var src []byte
	for _, f := range files {
		b, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic("presence: missing embedded script " + f) // the embed pattern guarantees it
		}
		src = append(src, b...)
		src = append(src, '\n')
	}
	return string(src)
}

// constantDef parses the definition of a named constant of a Lua file: a
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
// matches (TestConstantDef checks it against it), without package regexp,
// which would otherwise be linked into the WebAssembly builds for this
// alone.
func constantDef(line string) (name, num, base, plus string, ok bool) {
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

// inlineConstants writes every use of a named constant (constantDef) in
// src as its value, and blanks its definition, keeping the lines where
// they were. The scripts name their ARGV positions, statuses and the other
// numbers and separators they share with the engine once, as such
// constants, but a local costs a script an instruction on every call and
// each function that reads it an upvalue, which every call that defines
// the function pays for (a closure is made again on every call, an upvalue
// each): the script sent holds the values instead. Each file stays valid
// Lua as written, and means the same: a constant defined again (a scope script's
// own ARG_NOW after userlib.lua's) applies from its definition on, as a
// Lua local does. A constant defined from one not yet defined panics:
// TestLuaArgNames loads every script.
func inlineConstants(src string) string {
	values := map[string]string{}
	lines := strings.SplitAfter(src, "\n")
	for i, line := range lines {
		body := strings.TrimSuffix(line, "\n")
		if name, num, base, plus, ok := constantDef(body); ok {
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

func loadScripts() scriptSet {
	user := []string{"recordlib", "userlib"}
	scope := []string{"recordlib", "userlib", "scopelib"}
	s := scriptSet{
		beat:        loadScript("heartbeat_steady", "recordlib"),
		heartbeat:   loadScript("heartbeat_full", user...),
		login:       loadScript("login", user...),
		logout:      loadScript("logout", user...),
		manual:      loadScript("manual", user...),
		status:      loadScript("status", user...),
		sweepUsers:  loadScript("sweep_users", user...),
		unlock:      loadScript("unlock"),
		touch:       loadScript("touch", scope...),
		leave:       loadScript("leave", scope...),
		count:       loadScript("count", scope...),
		members:     loadScript("members", scope...),
		active:      loadScript("active", scope...),
		sweepScopes: loadScript("sweep_scopes", scope...),
		logAppend:   loadScript("log_append"),
		logRead:     loadScript("log_read"),
		outboxAck:   loadScript("outbox_ack"),
		shardTouch:  loadScript("shard_touch", user...),
		shardLen:    loadScript("shard_len"),
		shardSweep:  loadScript("shard_sweep", scope...),
		shardDrop:   loadScript("shard_drop"),
		scopeFinish: loadScript("scope_finish", scope...),
		counts:      loadScript("counts"),
		ping:        loadScript("ping"),
	}
	// the names the heartbeat's two scripts are known by (Name)
	s.beat.name, s.heartbeat.name = "beat", "heartbeat"
	s.bySHA = map[string]*Script{}
	for _, sc := range s.all() {
		s.bySHA[sc.sha] = sc
	}
	return s
}

func (s scriptSet) all() []*Script {
	return []*Script{s.beat, s.heartbeat, s.login, s.logout, s.manual, s.status, s.sweepUsers, s.unlock,
		s.touch, s.leave, s.count, s.members, s.active, s.sweepScopes, s.logAppend, s.logRead, s.outboxAck,
		s.shardTouch, s.shardLen, s.shardSweep, s.shardDrop, s.scopeFinish, s.counts, s.ping}
}

// Scripts returns every script the engine runs, for tools that preload them
// (SCRIPT LOAD) or inspect them.
func Scripts() []*Script { return loadScripts().all() }
