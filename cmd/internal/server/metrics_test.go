package server_test

import (
	"bufio"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// labelValue matches one label's value in the text exposition.
var labelValue = regexp.MustCompile(`[a-zA-Z_][a-zA-Z0-9_]*="((?:[^"\\]|\\.)*)"`)

// TestMetricsConventions checks /metrics against Prometheus' conventions
// as docs/production.md lists them: the method is a label of its own (a
// refused DELETE is not counted as the route's GET), a refused heartbeat
// says why, a rate limit says which budget refused, presence_redis_up
// follows Redis, and no label value holds a space.
func TestMetricsConventions(t *testing.T) {
	mr := miniredis.RunT(t)
	cfg := testConfig()
	cfg.HeartbeatRate, cfg.HeartbeatBurst = 0.001, 2
	in := startServer(t, newStore(t, mr.Addr()), cfg)
	admin := token(t, "ops", "presence_admin")
	alice := in.as(t, token(t, "alice"))
	alice.must("POST", "/v1/heartbeat", `{"device":"d"}`, nil)
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"device":"d","at":1000}`, http.StatusBadRequest},
		{`{"device":"d","kind":"toaster"}`, http.StatusBadRequest},
		{`{"device":"d"}`, http.StatusTooManyRequests},
	} {
		if code, e := alice.do("POST", "/v1/heartbeat", tc.body, nil); code != tc.want {
			t.Fatalf("heartbeat %s: %d %+v, want %d", tc.body, code, e, tc.want)
		}
	}
	if code, _ := alice.do("DELETE", "/v1/users/alice/status", nil, nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE status: %d, want 405", code)
	}
	waitFor(t, 5*time.Second, "presence_redis_up 1", func() bool { return metric(t, in.url, admin, "presence_redis_up") == 1 })
	for series, want := range map[string]float64{
		`presence_heartbeats_total{reason="",result="accepted"}`:                                                  1,
		`presence_heartbeats_total{reason="clock_skew",result="refused"}`:                                         1,
		`presence_heartbeats_total{reason="invalid_field",result="refused"}`:                                      1,
		`presence_heartbeats_total{reason="rate_limited",result="refused"}`:                                       1,
		`presence_rate_limited_total{budget="session"}`:                                                           1,
		`presence_rate_limited_total{budget="read"}`:                                                              0,
		`presence_http_requests_total{code="405",listener="api",method="DELETE",route="/v1/users/{user}/status"}`: 1,
		`presence_http_requests_total{code="405",listener="api",method="GET",route="/v1/users/{user}/status"}`:    -1,
		`presence_change_log_gaps_total`:                                                                          0,
	} {
		if got := metric(t, in.url, admin, series); got != want {
			t.Errorf("%s = %v, want %v (-1: no such series)", series, got, want)
		}
	}
	if got := metric(t, in.url, admin, `presence_change_log_entries_read_total`); got < 1 {
		t.Errorf("presence_change_log_entries_read_total = %v, want the logged change counted", got)
	}

	mr.Close()
	waitFor(t, 5*time.Second, "presence_redis_up 0", func() bool { return metric(t, in.url, admin, "presence_redis_up") == 0 })
	if code, e := in.as(t, token(t, "bob")).do("POST", "/v1/heartbeat", `{"device":"d"}`, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("heartbeat without Redis: %d %+v", code, e)
	}
	if got := metric(t, in.url, admin, `presence_heartbeats_total{reason="unavailable",result="failed"}`); got != 1 {
		t.Errorf("failed heartbeats = %v, want 1", got)
	}
	waitFor(t, 5*time.Second, "a sweep error counted", func() bool {
		return metric(t, in.url, admin, `presence_engine_errors_total{op="sweep_users"}`) > 0
	})

	res, body := send(t, "GET", in.url+"/metrics", "", map[string]string{"Authorization": "Bearer " + admin})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", res.StatusCode)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, m := range labelValue.FindAllStringSubmatch(line, -1) {
			if strings.ContainsAny(m[1], " \t") {
				t.Errorf("a label value with a space: %s", line)
			}
		}
	}
	for _, gone := range []string{"presence_sweep_items_total", "presence_change_log_entries_total{"} {
		if strings.Contains(body, gone) {
			t.Errorf("/metrics still has %s", gone)
		}
	}
}

// TestMethodLabelIsBounded: a method HTTP does not define is counted as
// "other", so that clients cannot make up label values.
func TestMethodLabelIsBounded(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	req, _ := http.NewRequest("BREW", in.url+"/v1/info", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	admin := token(t, "ops", "presence_admin")
	if got := metric(t, in.url, admin, `presence_http_requests_total{code="405",listener="api",method="other",route="/v1/info"}`); got != 1 {
		t.Fatalf(`BREW /v1/info counted %v times as method="other", want 1`, got)
	}
}
