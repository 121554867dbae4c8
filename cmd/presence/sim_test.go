package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestSimCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"sim", "--users", "80", "--duration", "3m", "--engine", "native",
		"--mix", "crash=0.5,exclusive=0.3", "--quiet", "--out", dir}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "no disagreement beyond what the design allows") {
		t.Errorf("output:\n%s", out.String())
	}
	for _, f := range []string{"series.csv", "chart.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) < 100 {
			t.Errorf("%s: %d bytes, %v", f, len(b), err)
		}
	}
	// Without --quiet, a progress line per virtual minute labels the
	// engine's figures and the truth's.
	out.Reset()
	code = run(context.Background(), []string{"sim", "--users", "20", "--duration", "1m", "--engine", "native", "--out", t.TempDir()}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if !regexp.MustCompile(`t=1m0s +wall= *[0-9.]+s online engine=\d+ truth=\d+  viewers engine=\d+ truth=\d+  events=\d+ redis=\d+\n`).MatchString(out.String()) {
		t.Errorf("progress:\n%s", out.String())
	}
	if code := run(context.Background(), []string{"sim", "--mix", "nonsense=1"}, &out, &errOut); code != 2 {
		t.Errorf("a bad --mix: exit %d, want 2", code)
	}
}
