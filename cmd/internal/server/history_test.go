package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/chromedp/chromedp"

	"github.com/presencekit/presence/cmd/history"
	"github.com/presencekit/presence/cmd/internal/server"
)

// seedHistory writes a simulated day into the SQLite file at path: one
// snapshot a minute for the 24 hours before end, ONLINE rising to a peak
// of 150 at 12:00 and falling back, AWAY a tenth of it, and the scope
// room:lobby with a member per 10 online users.
func seedHistory(t testing.TB, path string, end time.Time) (peak time.Time) {
	t.Helper()
	st, err := history.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := end.Add(-24 * time.Hour).Truncate(time.Minute)
	for at := start; at.Before(end); at = at.Add(time.Minute) {
		m := int64(at.Sub(start) / time.Minute) // 0…1439
		online := 150 - abs(m-720)/5            // 6…150, peak at minute 720
		snap := history.Snapshot{At: at, Online: map[string]int64{"ONLINE": online, "AWAY": online / 10, "DND": 1, "PUSH_ONLINE": 0},
			Scopes: []history.ScopeCount{{Class: "room", Scope: "lobby", Members: online / 10}}}
		if _, err := st.Write(context.Background(), snap, "seed", at); err != nil {
			t.Fatal(err)
		}
		if m == 720 {
			peak = at
		}
	}
	return peak
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// TestHistoryEndpoint reads a seeded day back through GET /v1/history:
// by status in 5-minute steps with the peak, a scope's count, the
// parameters' validation and the admin claim.
func TestHistoryEndpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	end := time.Now().Truncate(time.Minute)
	peak := seedHistory(t, path, end)
	cfg := testConfig()
	cfg.History = history.Config{DSN: path}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	admin := in.as(t, token(t, "ops", "presence_admin"))

	var h server.HistoryResponse
	waitFor(t, 10*time.Second, "the history database to be opened", func() bool {
		code, _ := admin.do("GET", "/v1/history", nil, &h)
		return code == http.StatusOK
	})
	admin.must("GET", fmt.Sprintf("/v1/history?from=%d&to=%d&scope=room:lobby", end.Add(-24*time.Hour).UnixMilli(), end.UnixMilli()), nil, &h)
	if h.StepMS != 5*60*1000 || len(h.Points) != 288 {
		t.Fatalf("24 h: step %d ms, %d points; want 5 min, 288", h.StepMS, len(h.Points))
	}
	if d := h.Peak.At - peak.UnixMilli(); h.Peak == nil || h.Peak.Total != 150+15+1 || h.Peak.ByStatus["ONLINE"] != 150 || d < -5*60*1000 || d > 0 { // 150 from minute 716 to 724
		t.Fatalf("peak %+v, want 166 users in the step holding minute 716 (%v - 4 min)", h.Peak, peak)
	}
	if h.Scope == nil || h.Scope.Scope != "room:lobby" || len(h.Scope.Points) != 288 {
		t.Fatalf("scope: %+v", h.Scope)
	}
	admin.must("GET", fmt.Sprintf("/v1/history?from=%d&to=%d&step=1h", end.Add(-24*time.Hour).UnixMilli(), end.UnixMilli()), nil, &h)
	if len(h.Points) != 24 {
		t.Fatalf("1 h steps: %d points", len(h.Points))
	}
	for _, tc := range []struct{ query, field string }{
		{"?from=x", "from"}, {"?step=-1", "step"}, {"?from=10&to=5", "from"}, {"?step=1ms", "step"}, {"?scope=lobby", "scope"},
	} {
		code, e := admin.do("GET", "/v1/history"+tc.query, nil, nil)
		if code != http.StatusBadRequest || e == nil || e.Field != tc.field {
			t.Errorf("%s: %d %+v, want 400 naming %s", tc.query, code, e, tc.field)
		}
	}
	if code, _ := in.as(t, token(t, "alice", "presence_read")).do("GET", "/v1/history", nil, nil); code != http.StatusForbidden {
		t.Fatalf("history without the admin claim: %d", code)
	}
	t.Logf("HISTORY /v1/history over a seeded day: %d points of 5 min, peak %d users", 288, 166)
}

// TestHistoryOffAndLive: without a database the endpoint says the history
// is off; with one, the running server snapshots what it sees (a user
// heartbeating) into it.
func TestHistoryOffAndLive(t *testing.T) {
	off := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	if code, e := off.as(t, token(t, "ops", "presence_admin")).do("GET", "/v1/history", nil, nil); code != http.StatusNotFound || e == nil || !strings.Contains(e.Message, "off") {
		t.Fatalf("history off: %d %+v", code, e)
	}

	path := filepath.Join(t.TempDir(), "history.db")
	cfg := testConfig()
	cfg.History = history.Config{DSN: path, Every: time.Second, Users: true}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	in.as(t, token(t, "alice")).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	admin := in.as(t, token(t, "ops", "presence_admin"))
	waitFor(t, 20*time.Second, "a snapshot with alice online", func() bool {
		var h server.HistoryResponse
		q := fmt.Sprintf("/v1/history?from=%d&step=1000", time.Now().Add(-time.Minute).UnixMilli())
		if code, _ := admin.do("GET", q, nil, &h); code != http.StatusOK {
			return false
		}
		for _, p := range h.Points {
			if p.ByStatus["ONLINE"] == 1 {
				return true
			}
		}
		return false
	})
	st, err := history.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var n int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM presence_online_users WHERE user_id = 'alice' AND status = 'ONLINE'`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("alice in presence_online_users: %d rows, %v", n, err)
	}
}

// TestHistoryDatabaseDown: a history database that accepts connections
// and never answers. The service starts, heartbeats and reads are
// answered, /readyz is ready, /v1/history answers 503, and the failed
// snapshots are logged at error level and counted in /metrics.
func TestHistoryDatabaseDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	cfg := testConfig()
	logs := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.History = history.Config{DSN: fmt.Sprintf("postgres://x@%s/x?sslmode=disable", ln.Addr()), Every: time.Second,
		Timeout: 300 * time.Millisecond, RetryEvery: 100 * time.Millisecond}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	alice := in.as(t, token(t, "alice"))
	for range 20 {
		alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	}
	alice.must("GET", "/v1/users/alice/status", nil, nil)
	if code, _, _ := get(t, in.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with the history database down: %d", code)
	}
	admin := in.as(t, token(t, "ops", "presence_admin"))
	if code, _ := admin.do("GET", "/v1/history", nil, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/v1/history with the database down: %d", code)
	}
	waitFor(t, 20*time.Second, "failed snapshots logged and counted", func() bool {
		_, body := send(t, "GET", in.url+"/metrics", "", map[string]string{"Authorization": "Bearer " + token(t, "ops", "presence_admin")})
		return strings.Contains(body, `presence_history_snapshots_total{result="failed"}`) &&
			strings.Contains(logs.String(), `level=ERROR msg="presence: online-history snapshot failed; retrying"`)
	})
	t.Logf("HISTORY database down: 20 heartbeats answered, /readyz 200, /v1/history 503; log: %s",
		firstLineWith(logs.String(), "snapshot failed"))
}

func firstLineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestHistoryChartInBrowser drives headless Chromium: the dashboard, over
// a service whose history database holds a simulated day (seedHistory)
// and which snapshots its own state every second, draws online users by
// status over the last 24 hours with the peak marked. It saves a
// screenshot as an artifact.
func TestHistoryChartInBrowser(t *testing.T) {
	bin := chromium(t)
	path := filepath.Join(t.TempDir(), "history.db")
	seedHistory(t, path, time.Now().Truncate(time.Minute))
	cfg := testConfig()
	cfg.History = history.Config{DSN: path, Every: time.Second}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	in.as(t, token(t, "browser-bob")).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	admin := token(t, "dashboard-test", "presence_admin")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 1300))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 45*time.Second)
	defer cancel()
	shot := func(name string) { saveShot(t, bctx, filepath.Join(artifactDir(t), name)) }
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			shot("dashboard-history-failure.png")
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("open the dashboard", chromedp.Navigate(in.url+"/dashboard/#token="+admin), chromedp.WaitVisible(chromedp.ID("history-chart")))
	step("the chart draws the day, one line per status",
		chromedp.Poll[chromedp.Void](`(() => { const s = document.getElementById('history-chart');
			return Number(s.getAttribute('data-points')) >= 280 && s.querySelectorAll('polyline').length === 4; })()`,
			chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	peak, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const g = document.getElementById('history-peak');
		return g ? g.getAttribute('data-total') + " | " + g.querySelector('text').textContent : ""; })()`))
	// The seeded peak: 150 ONLINE, 15 AWAY, 1 DND; the dot sits on the
	// ONLINE line, so the label gives that line's count first.
	if err != nil || !strings.HasPrefix(peak, "166 | peak 150 ONLINE at ") || !strings.HasSuffix(peak, "(166 in all)") {
		shot("dashboard-history-failure.png")
		t.Fatalf("peak marker: %q, %v; want 150 ONLINE, 166 in all", peak, err)
	}
	// Steps on fixed boundaries, ticks at whole hours, text at its size.
	geom, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const s = document.getElementById('history-chart');
		const step = Number(s.dataset.step), from = Number(s.dataset.from);
		const ticks = [...s.querySelectorAll('line.tick')].map((l) => Number(l.dataset.at));
		const vb = s.viewBox.baseVal.width, w = s.getBoundingClientRect().width;
		return [step, from % step, ticks.length >= 4, ticks.every((at) => new Date(at).getMinutes() === 0 && at % 60000 === 0),
			s.hasAttribute('preserveAspectRatio'), Math.abs(vb - w) <= 1, /^\d+ steps of 5 min/.test(document.getElementById('history-note').textContent)].join(" "); })()`))
	if want := "300000 0 true true false true true"; err != nil || geom != want {
		shot("dashboard-history-failure.png")
		t.Fatalf("chart geometry (step, from mod step, ticks, at whole hours, preserveAspectRatio, drawn at its size, note): %q, %v; want %q", geom, err, want)
	}
	shot("dashboard-history.png")
	t.Logf("HISTORY chart in the browser: 4 status lines over the last 24 h in fixed 5-minute steps, marker %q", peak)
}
