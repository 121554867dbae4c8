package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/chromedp/chromedp"

	"github.com/presencekit/presence/cmd/history"
	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/limits"
)

// chromium returns the first Chromium-like browser on PATH, and skips the
// test when there is none.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium, chromium-browser or google-chrome on PATH: install Debian's chromium package to run the browser test")
	return ""
}

// artifactDir is where the test saves its screenshots: $PRESENCE_ARTIFACTS
// if set, else a temporary directory of the test.
func artifactDir(t *testing.T) string {
	if dir := os.Getenv("PRESENCE_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// saveShot saves a screenshot of the page of ctx at path; a browser that
// cannot take one is logged, not failed.
func saveShot(t *testing.T, ctx context.Context, path string) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", path, err)
		return
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Error(err)
		return
	}
	t.Logf("screenshot saved: %s", path)
}

// TestDashboardInBrowser drives headless Chromium: it opens the dashboard
// with an admin token, opens a simulated device, and sees the device's
// status and its scope's count change on the page, in the device card and
// in the dashboard's own panels; then, left idle, the device turns AWAY.
// It saves screenshots as artifacts.
func TestDashboardInBrowser(t *testing.T) {
	bin := chromium(t)
	cfg := testConfig()
	cfg.Engine.Intervals = map[core.Kind]time.Duration{core.KindWeb: time.Second}
	cfg.Engine.IdleAfter = 3 * time.Second
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	admin := token(t, "dashboard-test", "presence_admin")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 1100),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 45*time.Second)
	defer cancel()

	dir := artifactDir(t)
	shot := func(name string) { saveShot(t, bctx, filepath.Join(dir, name)) }
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			shot("dashboard-failure.png")
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll := func(what, js string) {
		t.Helper()
		step(what, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	}

	step("open the dashboard",
		chromedp.Navigate(in.url+"/dashboard/#token="+admin),
		chromedp.WaitVisible(chromedp.ID("new-device")),
		chromedp.SetValue(chromedp.ID("dev-user"), "browser-alice"),
		chromedp.Click(chromedp.ID("new-device")),
	)
	poll("the device card shows ONLINE",
		`(() => { const b = document.querySelector('.device[data-user="browser-alice"] .device-status'); return !!b && b.textContent === 'ONLINE'; })()`)
	poll("the device card shows the scope count",
		`document.querySelector('.device[data-user="browser-alice"] .scope-count')?.textContent === '1'`)
	poll("the hottest scopes show room:lobby with one member",
		`document.querySelector('tr[data-scope="room:lobby"] .scope-count')?.textContent === '1'`)
	poll("the online tile counts the user",
		`document.getElementById('n-ONLINE')?.textContent === '1' && !!document.querySelector('#users tr[data-user="browser-alice"]')`)
	poll("the event stream shows the change",
		`[...document.querySelectorAll('#events li')].some(li => li.textContent.includes('browser-alice: OFFLINE → ONLINE'))`)
	shot("dashboard.png")
	poll("left idle, the device turns AWAY",
		`document.querySelector('.device[data-user="browser-alice"] .device-status')?.textContent === 'AWAY'`)
	shot("dashboard-away.png")
}

// wallIDs are user IDs a team meets: short, a UUID, a 42-character
// e-mail, and one of 128 bytes (the most an ID may have).
var wallIDs = []string{
	"ann",
	"3f2b8c1e-9d4a-4e7b-a1c2-5d6e7f8a9b0c",
	"firstname.lastname-team42@example-corp.com",
	"tenant-7:" + strings.Repeat("very-long-user-identifier-", 5)[:119],
}

// TestDashboardWallInBrowser drives headless Chromium at 1280 px over the
// dashboard a team keeps on a wall: users with realistic IDs each keep one
// line (the long ones cut with an ellipsis, whole on hover) with their
// badges and times whole; the panels use the width; then Redis goes away
// and the page shows an outage banner counting the time, marks its
// figures stale and stops saying "events: live"; then Redis comes back.
// It saves a screenshot of each state as an artifact.
func TestDashboardWallInBrowser(t *testing.T) {
	bin := chromium(t)
	if len(wallIDs[3]) != limits.IDBytes {
		t.Fatalf("the long ID has %d bytes; want %d", len(wallIDs[3]), limits.IDBytes)
	}
	m := miniredis.RunT(t)
	cfg := testConfig()
	// One snapshot, at start-up: the chart has one step.
	cfg.History = history.Config{DSN: filepath.Join(t.TempDir(), "history.db"), Every: time.Hour}
	in := startServer(t, newStore(t, m.Addr()), cfg)
	for _, u := range wallIDs {
		if _, err := in.srv.Engine().Heartbeat(context.Background(), core.Heartbeat{User: u, Device: "d", Kind: core.KindDesktop, Active: true}); err != nil {
			t.Fatal(err)
		}
		in.as(t, token(t, u)).must("POST", "/v1/scopes/room/"+url.PathEscape(u)+"/touch", map[string]string{"member": u}, nil)
	}
	admin := token(t, "dashboard-test", "presence_admin")
	ctx, bctx := headless(t, bin, 1280, 1100)
	dir := artifactDir(t)
	shot := func(name string) { saveShot(t, bctx, filepath.Join(dir, name)) }
	poll := func(what, js string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			shot("dashboard-wall-failure.png")
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(js string) string {
		t.Helper()
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluate: %v", err)
		}
		return out
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(in.url+"/dashboard/#token="+admin)); err != nil {
		t.Fatal(err)
	}
	poll("every user and scope has a row", `document.querySelectorAll('#users tr').length === 4 && document.querySelectorAll('#scopes tr').length === 4`)
	poll("the stream is live", `document.getElementById('stream-state').textContent === 'events: live'`)
	poll("the chart's note says 1 step", `document.getElementById('history-note').textContent.startsWith('1 step of 5 min,')`)

	// Rows: one line each, the badge and time whole, the long IDs cut and
	// whole in the title.
	scopes := eval(`JSON.stringify([...document.querySelectorAll('#scopes tr')].map((tr) => Math.round(tr.getBoundingClientRect().height)))`)
	t.Logf("WALL scope rows' heights: %s px", scopes)
	if !allSame(scopes) {
		t.Errorf("the scope rows differ in height: %s; want one line each", scopes)
	}
	rows := eval(`JSON.stringify([...document.querySelectorAll('#users tr')].map((tr) => {
		const [u, st, at] = tr.cells, b = st.querySelector('.badge');
		return { user: tr.dataset.user, h: tr.getBoundingClientRect().height, title: u.title,
			cut: u.scrollWidth > u.clientWidth, badgeWhole: b.scrollWidth <= st.clientWidth && b.getClientRects().length === 1,
			badgeH: b.getBoundingClientRect().height, timeWhole: at.scrollWidth <= at.clientWidth };
	}))`)
	var got []struct {
		User, Title                string
		H, BadgeH                  float64
		Cut, BadgeWhole, TimeWhole bool
	}
	if err := json.Unmarshal([]byte(rows), &got); err != nil {
		t.Fatal(err)
	}
	var short float64
	for _, r := range got {
		if r.User == "ann" {
			short = r.H
		}
	}
	for _, r := range got {
		t.Logf("WALL row %d bytes: %.1f px high (ann's %.1f), cut %v, badge whole %v, time whole %v", len(r.User), r.H, short, r.Cut, r.BadgeWhole, r.TimeWhole)
		if r.H > short+1 || r.H > 40 { // one line of 14 px text is about 30 px high with its padding
			t.Errorf("the row of %q is %.1f px high (ann's %.1f); want one line", r.User, r.H, short)
		}
		if r.Title != r.User {
			t.Errorf("the row of %q has title %q; want the whole ID", r.User, r.Title)
		}
		if !r.BadgeWhole || !r.TimeWhole || r.BadgeH > 24 {
			t.Errorf("the row of %q cuts or wraps its badge (%v, %.1f px) or time (%v)", r.User, r.BadgeWhole, r.BadgeH, r.TimeWhole)
		}
		if len(r.User) == limits.IDBytes && !r.Cut {
			t.Errorf("the 128-byte ID is not cut with an ellipsis")
		}
	}
	// The width: at 1280 px the panels beside each other fill the row.
	layout := eval(`(() => {
		const main = document.querySelector('main').getBoundingClientRect(), pad = parseFloat(getComputedStyle(document.querySelector('main')).paddingRight);
		const r = (id) => document.getElementById(id).getBoundingClientRect();
		return [main.right - pad - r('scopes-panel').right, main.right - pad - r('sweeper-panel').right,
			Math.abs(r('users-panel').top - r('scopes-panel').top), Math.abs(r('events-panel').top - r('sweeper-panel').top)].map(Math.round).join(" ");
	})()`)
	t.Logf("WALL layout at 1280 px: right gaps of scopes and sweeper, top offsets of the pairs: %s px", layout)
	if layout != "0 0 0 0" {
		t.Errorf("at 1280 px the panels leave the width unused: %s; want 0 0 0 0", layout)
	}
	shot("dashboard-wall.png")

	m.Close()
	lost := time.Now()
	poll("the outage banner shows", `(() => { const o = document.getElementById('outage');
		return !o.classList.contains('hidden') && o.textContent.startsWith('Redis unreachable for '); })()`)
	poll("the header does not say live", `document.getElementById('stream-state').textContent === 'events: stalled (Redis down)'`)
	poll("the figures are marked stale", `document.getElementById('users-panel').classList.contains('stale') && document.getElementById('scopes-panel').classList.contains('stale')`)
	poll("the banner counts the time", `/Redis unreachable for [2-9] s/.test(document.getElementById('outage').textContent)`)
	banner := eval(`document.getElementById('outage').textContent`)
	t.Logf("WALL outage banner %s after Redis went: %q", time.Since(lost).Round(100*time.Millisecond), banner)
	shot("dashboard-outage.png")

	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	poll("the banner goes once Redis is back", `document.getElementById('outage').classList.contains('hidden') &&
		!document.getElementById('users-panel').classList.contains('stale') && document.getElementById('stream-state').textContent === 'events: live'`)
	shot("dashboard-recovered.png")
}

// allSame reports whether a JSON list holds one value only.
func allSame(list string) bool {
	var v []float64
	if err := json.Unmarshal([]byte(list), &v); err != nil || len(v) == 0 {
		return false
	}
	for _, x := range v {
		if x != v[0] {
			return false
		}
	}
	return true
}

// headless starts a headless Chromium of w×h pixels for the test; it
// returns a context for its actions (45 s) and the browser's.
func headless(t *testing.T, bin string, w, h int) (ctx, browser context.Context) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.WindowSize(w, h))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil { // start it, for the tabs opened from browser
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(browser, 45*time.Second)
	t.Cleanup(cancel)
	return ctx, browser
}

// TestCrossOriginInBrowser drives headless Chromium against a server in
// --insecure-dev (no token: the case a page can abuse) that lists one
// other origin in CORSOrigins. A page of an unlisted origin cannot change
// state, whether it posts a Blob in no-cors mode (no preflight, no JSON
// Content-Type), text, or JSON through CORS (the preflight is refused);
// a page of the listed origin can, and reads the answer.
func TestCrossOriginInBrowser(t *testing.T) {
	bin := chromium(t)
	page := func() *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<!doctype html><title>another site</title><p>another site</p>")
		}))
		t.Cleanup(s.Close)
		return s
	}
	friend, evil := page(), page()
	cfg := testConfig()
	cfg.Auth = server.AuthConfig{InsecureDev: true}
	cfg.CORSOrigins = []string{friend.URL}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 45*time.Second)
	defer cancel()

	run := func(pageURL, js string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
			t.Fatalf("open %s: %v", pageURL, err)
		}
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("script on %s: %v", pageURL, err)
		}
		return out
	}
	api := strconv.Quote(in.url + "/v1/heartbeat")
	attack := `(async () => {
		const out = [];
		const beat = (user) => JSON.stringify({user, device: "d"});
		try { await fetch(` + api + `, {method: "POST", mode: "no-cors", body: new Blob([beat("victim-blob")])}); out.push("blob sent"); } catch (e) { out.push("blob failed"); }
		try { await fetch(` + api + `, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: beat("victim-text")}); out.push("text sent"); } catch (e) { out.push("text failed"); }
		try { const r = await fetch(` + api + `, {method: "POST", headers: {"Content-Type": "application/json"}, body: beat("victim-cors")}); out.push("cors " + r.status); } catch (e) { out.push("cors refused"); }
		return out.join(", ");
	})()`
	got := run(evil.URL, attack)
	t.Logf("unlisted origin: %s", got)
	if !strings.Contains(got, "cors refused") {
		t.Errorf("the unlisted origin's CORS request was not refused: %s", got)
	}
	got = run(friend.URL, `(async () => {
		const r = await fetch(`+api+`, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({user: "friend", device: "d"})});
		const body = await r.json();
		return r.status + " " + (body.token ? "token" : JSON.stringify(body));
	})()`)
	if got != "200 token" {
		t.Errorf("the listed origin's heartbeat: %s; want 200 and a readable answer", got)
	}

	anon := in.as(t, "")
	for user, want := range map[string]string{"victim-blob": "OFFLINE", "victim-text": "OFFLINE", "victim-cors": "OFFLINE", "friend": "ONLINE"} {
		var st server.UserStatus
		anon.must("GET", "/v1/users/"+user+"/status", nil, &st)
		if st.Status != want {
			t.Errorf("%s is %s; want %s", user, st.Status, want)
		}
	}
}
