package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/chromedp/chromedp"

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
