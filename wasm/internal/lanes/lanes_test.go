package lanes

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestNativeSequence runs the sequence natively and checks that it shows
// what the lanes are meant to compare: results, a kick, changes to
// publish, refusals and a sweep's report.
func TestNativeSequence(t *testing.T) {
	seq, want := Want(t)
	if len(want) != seq.Len() {
		t.Fatalf("%d lines for %d requests", len(want), seq.Len())
	}
	all := strings.Join(want, "\n")
	for _, s := range []string{`"kind":"kick"`, `"kind":"change"`, `"code":"invalid"`, `"to":"DND"`, `"removed":`, `"to":"OFFLINE"`} {
		if !strings.Contains(all, s) {
			t.Errorf("the native run lacks %s", s)
		}
	}
	for i, l := range want {
		t.Logf("%s\n  %s", seq.Line(i), l)
	}
}

func TestCompareNamesTheStep(t *testing.T) {
	seq := Sequence{Steps: []Step{{Name: "one", Requests: make([]json.RawMessage, 2)}, {Name: "two", Requests: make([]json.RawMessage, 1)}}}
	if got := seq.Line(2); !strings.HasPrefix(got, "two (request 1") {
		t.Errorf("Line(2) = %q", got)
	}
	ft := &fakeT{}
	Compare(ft, "lane", seq, "a\nb\nX\n", []string{"a", "b", "c"})
	if !strings.Contains(ft.msg, "two") {
		t.Errorf("Compare reported %q", ft.msg)
	}
}

type fakeT struct{ msg string }

func (f *fakeT) Helper()                           {}
func (f *fakeT) Errorf(format string, args ...any) { f.msg += fmt.Sprintf(format, args...) }
