package jsclient_test

import (
	"os"
	"os/exec"
	"testing"
)

// TestNode runs presence.test.mjs, the unit tests of presence.js, in
// Node.js's test runner (token refresh, backoff and Retry-After,
// session_replaced, the event stream's parsing and resume). Without node
// the test skips, or fails where PRESENCE_REQUIRE_LANES is set.
func TestNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		why := "node is not on PATH: cannot run presence.test.mjs"
		if os.Getenv("PRESENCE_REQUIRE_LANES") != "" {
			t.Fatalf("%s (and PRESENCE_REQUIRE_LANES is set)", why)
		}
		t.Skip(why)
	}
	out, err := exec.Command(node, "--test", "--test-reporter=spec", "presence.test.mjs").CombinedOutput()
	t.Logf("node --test presence.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
}
