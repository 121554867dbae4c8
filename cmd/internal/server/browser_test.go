package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/chromedp/chromedp"

	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
)

// chromiumBinary returns the first Chromium-like browser on PATH, or "".
func chromiumBinary() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
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

// TestDashboardInBrowser drives headless Chromium: it opens the dashboard
// with an admin token, opens a simulated device, and sees the device's
// status and its scope's count change on the page, in the device card and
// in the dashboard's own panels; then, left idle, the device turns AWAY.
// It saves screenshots as artifacts.
func TestDashboardInBrowser(t *testing.T) {
	bin := chromiumBinary()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: install Debian's chromium package to run the browser test")
	}
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
	shot := func(name string) {
		sctx, scancel := context.WithTimeout(bctx, 10*time.Second)
		defer scancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Logf("screenshot %s: %v", name, err)
			return
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot saved: %s", path)
	}
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

// TestCrossOriginInBrowser drives headless Chromium against a server in
// --insecure-dev (no token: the case a page can abuse) that lists one
// other origin in CORSOrigins. A page of an unlisted origin cannot change
// state, whether it posts a Blob in no-cors mode (no preflight, no JSON
// Content-Type), text, or JSON through CORS (the preflight is refused);
// a page of the listed origin can, and reads the answer.
func TestCrossOriginInBrowser(t *testing.T) {
	bin := chromiumBinary()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: install Debian's chromium package to run the browser test")
	}
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
