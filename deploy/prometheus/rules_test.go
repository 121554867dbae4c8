package prometheus

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestAlertRules runs `promtool test rules presence.rules_test.yml` and
// checks that the test file shows every alert of presence.rules.yml both
// firing (an eval with expected alerts) and not firing (exp_alerts: []).
func TestAlertRules(t *testing.T) {
	alerts := alertNames(t, "presence.rules.yml")
	if len(alerts) == 0 {
		t.Fatal("no alerts in presence.rules.yml")
	}
	firing, quiet := evalCases(t, "presence.rules_test.yml")
	for _, a := range alerts {
		if firing[a] == 0 || quiet[a] == 0 {
			t.Errorf("alert %s: %d firing and %d not-firing cases in presence.rules_test.yml; want at least one of each", a, firing[a], quiet[a])
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool on PATH: install Debian's prometheus package (apt-get install prometheus) to run the rules' unit tests")
	}
	out, err := exec.Command(promtool, "test", "rules", "presence.rules_test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("promtool test rules: %d alerts, %s", len(alerts), strings.TrimSpace(string(out)))
}

var (
	alertLine     = regexp.MustCompile(`^\s*- alert:\s*(\S+)`)
	alertnameLine = regexp.MustCompile(`^\s*alertname:\s*(\S+)`)
	expAlertsLine = regexp.MustCompile(`^\s*exp_alerts:\s*(\[\])?\s*$`)
)

func alertNames(t *testing.T, file string) []string {
	var names []string
	scan(t, file, func(line string) {
		if m := alertLine.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	})
	return names
}

// evalCases counts, per alert name, the alert_rule_test entries that
// expect alerts and those that expect none.
func evalCases(t *testing.T, file string) (firing, quiet map[string]int) {
	firing, quiet = map[string]int{}, map[string]int{}
	current := ""
	scan(t, file, func(line string) {
		if m := alertnameLine.FindStringSubmatch(line); m != nil {
			current = m[1]
		} else if m := expAlertsLine.FindStringSubmatch(line); m != nil && current != "" {
			if m[1] == "[]" {
				quiet[current]++
			} else {
				firing[current]++
			}
			current = ""
		}
	})
	return firing, quiet
}

func scan(t *testing.T, file string, f func(string)) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	s := bufio.NewScanner(fh)
	for s.Scan() {
		f(s.Text())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}
