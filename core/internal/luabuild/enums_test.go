package luabuild

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// TestEnums reads core's table, and tables made to differ from it.
func TestEnums(t *testing.T) {
	enums, err := Enums(os.DirFS("../.."))
	if err != nil {
		t.Fatal(err)
	}
	if len(enums) != 5 || enums[0].Type != "Status" || enums[0].Consts[1] != "StatusPushOnline" || enums[0].Names[1] != "PUSH_ONLINE" {
		t.Fatalf("Enums = %+v", enums)
	}
	src, err := os.ReadFile("../../" + TableFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new, err string }{
		{"", "", ""},
		{`"OFFLINE", "PUSH_ONLINE"`, `"PUSH_ONLINE", "OFFLINE"`, "StatusOffline is number 0, and so is name \"PUSH_ONLINE\""},
		{`, "DND"`, ``, "constants of type Status from iota"},
		{`"ios"`, `"i os"`, "Kind name \"i os\" is not"},
		{"var layoutNames", "var layoutNamesX", "3 constants of type Layout from iota, 0 names"},
		{"StatusOffline Status = iota", "StatusOffline Status = 0", "0 constants of type Status"},
		{`"exclusive-per-kind"`, `"exclusive-per-kind", 7`, "policyNames holds a value other than a string"},
	} {
		fsys := fstest.MapFS{TableFile: {Data: []byte(strings.Replace(string(src), c.old, c.new, 1))}}
		_, err := Enums(fsys)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q → %q: error %v, want %q", c.old, c.new, err, c.err)
		}
	}
}

// TestLuaConsts checks the names and values the scripts take.
func TestLuaConsts(t *testing.T) {
	enums, err := Enums(os.DirFS("../.."))
	if err != nil {
		t.Fatal(err)
	}
	got := LuaConsts(enums)
	for name, v := range map[string]string{"StatusOffline": "0", "StatusDND": "4", "ManualNone": "0", "KindOther": "'0'",
		"KindAndroid": "'4'", "PolicyExclusivePerKind": "2", "LayoutExact": "'0'", "LayoutApprox": "'2'"} {
		if got[name] != v {
			t.Errorf("%s = %q, want %q", name, got[name], v)
		}
	}
	n := 0
	for _, e := range enums {
		n += len(e.Consts)
	}
	if len(got) != n {
		t.Errorf("%d constants, want one for each of the %d constants of the enumerations", len(got), n)
	}
	if src := Inline("local A = 1\nreturn A + StatusDND + B\n", got); src != "\nreturn 1 + 4 + B\n" {
		t.Errorf("Inline = %q", src)
	}
}
