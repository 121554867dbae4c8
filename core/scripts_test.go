package core

import (
	"bytes"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"os"
	"testing"

	"github.com/presencekit/presence/core/internal/luabuild"
	"github.com/presencekit/presence/internal/luascripts"
)

// luaFiles are the Lua files as written, for the tests that read them.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// joinLua joins the Lua files, each named without ".lua", as a script
// holds them before its constants are written as numbers.
func joinLua(files ...string) string {
	var src []byte
	for _, f := range files {
		b, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic("presence: missing embedded script " + f) // the embed pattern guarantees it
		}
		src = append(append(src, b...), '\n')
	}
	return string(src)
}

// inlineLua returns Lua files joined (joinLua) with their named constants
// and core's (luabuild.LuaConsts) written in, as a script sends them.
func inlineLua(t testing.TB, src string) string {
	t.Helper()
	enums, err := luabuild.Enums(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	return luabuild.Inline(src, luabuild.LuaConsts(enums))
}

// TestScriptsGenerated fails when internal/luascripts/scripts_gen.go is
// not what the Lua files and status.go make: run go generate ./core.
// (TestGenerated in internal/genscripts checks every file go generate
// writes.)
func TestScriptsGenerated(t *testing.T) {
	want, err := luabuild.Generate(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../internal/luascripts/scripts_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/luascripts/scripts_gen.go is out of date: run go generate ./core")
	}
}

// TestScriptSources checks that each script the engine sends, its files'
// texts as scripts.go joins them, has the SHA1 that the generator computed
// for the files it joins, that the scripts' SHA1s differ, and that the
// engine's set holds every generated script, under its name.
func TestScriptSources(t *testing.T) {
	seen := map[string]string{}
	for _, s := range engineScripts().all() {
		sum := sha1.Sum([]byte(s.Source()))
		if got := hex.EncodeToString(sum[:]); got != s.SHA() {
			t.Errorf("%s: the source's SHA1 is %s, the generated one %s: go generate ./core", s.Name(), got, s.SHA())
		}
		if other, ok := seen[s.SHA()]; ok {
			t.Errorf("%s and %s have the same SHA1", s.Name(), other)
		}
		seen[s.SHA()] = s.Name()
	}
	if len(seen) != len(engineScripts().bySHA) {
		t.Errorf("%d scripts, %d by SHA1", len(seen), len(engineScripts().bySHA))
	}
	generated := luascripts.All()
	for _, g := range generated {
		if name, ok := seen[g.SHA]; !ok || name != g.Name {
			t.Errorf("generated script %s (%s) is not the engine's (%q)", g.Name, g.SHA, name)
		}
	}
	if len(generated) != len(seen) {
		t.Errorf("%d generated scripts, %d in the engine's set", len(generated), len(seen))
	}
}
