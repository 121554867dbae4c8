package luabuild

import (
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
)

// defRE is what Def matches.
var defRE = regexp.MustCompile(`^local ([A-Z][A-Z0-9_]*) = (\d+|'(?:[^'\\\n]|\\[^\n])*'|([A-Z][A-Z0-9_]*)(?: \+ (\d+))?)\s*(?:--.*)?$`)

func checkDef(t *testing.T, line string) {
	t.Helper()
	name, num, base, plus, ok := Def(line)
	m := defRE.FindStringSubmatch(line)
	if ok != (m != nil) {
		t.Fatalf("Def(%q): ok %v, the regular expression %v", line, ok, m != nil)
	}
	if !ok {
		return
	}
	wantNum := m[2]
	if m[3] != "" {
		wantNum = ""
	}
	if name != m[1] || num != wantNum || base != m[3] || plus != m[4] {
		t.Fatalf("Def(%q) = %q %q %q %q, the regular expression %q", line, name, num, base, plus, m)
	}
}

// TestDef checks Def against the regular expression it
// stands for, on every line of the Lua files and on lines made to differ.
func TestDef(t *testing.T) {
	lua := os.DirFS("../../lua")
	entries, err := fs.ReadDir(lua, ".")
	if err != nil {
		t.Fatal(err)
	}
	defs := 0
	for _, e := range entries {
		b, err := fs.ReadFile(lua, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			checkDef(t, line)
			if _, _, _, _, ok := Def(line); ok {
				defs++
			}
		}
	}
	if defs < 50 {
		t.Errorf("only %d constant definitions found in the Lua files", defs)
	}
	for _, line := range []string{
		"", "local", "local A = 1", "local A = 12 -- twelve", "local A = 1\t\r ", "local A = 1 -", "local A = 1 - 2",
		"local A = B", "local A = B + 1", "local A = B + 12 --x", "local A = B +1", "local A = B + ", "local A = B + x",
		"local A = B + 1x", "local A = B  + 1", "local A = B\t-- c\n", "local A = B -- c\nx", "local a = 1",
		"local _A = 1", "local A9_Z = B_1 + 0", "local A = 1x", "local A = -1", "local A=1", "local A = B + 1 + 2",
		"  local A = 1", "local A = 1 --", "local A = 1\v", "local A = ١", "local A = B + 1\f-- ok", "local AB = CD--",
		"local A = Bc", "local A = B.c", "local A = 0x10", "local A = 'x'", "local A = '\\31' -- c", "local A = 'it\\'s'",
		"local A = 'x", "local A = 'x' .. B", "local A = ''", "local A = 'a\\'", "local A = \"x\"", "local A = 'x'y'",
	} {
		checkDef(t, line)
	}
}

// FuzzDef checks Def against the regular expression.
func FuzzDef(f *testing.F) {
	for _, s := range []string{"local A = 1", "local A = B + 2 -- c", "local A = B\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) { checkDef(t, line) })
}
