package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBenchRefusesMiniredis(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"bench"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--redis is required") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

func TestBenchSmokeOnMiniredis(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"bench", "--allow-miniredis", "--quiet", "--only", "throughput,sweep",
		"--adapters", "goredis", "--duration", "30ms", "--users", "100", "--backlogs", "200", "--concurrency", "2",
		"--batch-concurrency", "1", "--batch", "20"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "miniredis") || !strings.Contains(out.String(), "heartbeat-batch") {
		t.Errorf("table:\n%s", out.String())
	}
}
