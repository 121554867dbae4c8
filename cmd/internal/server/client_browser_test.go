package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/chromedp/chromedp"

	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// gate stands between the browser and the server: it records every
// request (the heartbeats with their user), and can cut the network: while
// cut, every connection is closed without an answer, and the event
// streams open at the cut are ended.
type gate struct {
	next http.Handler
	ts   *httptest.Server

	mu      sync.Mutex
	cut     bool
	reqs    []gateReq
	streams map[*http.Request]context.CancelFunc
}

// gateReq is one request the gate saw.
type gateReq struct {
	at          time.Time
	path, user  string
	lastEventID string
	cut         bool // refused by the cut
	active      bool // a heartbeat's active flag
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := gateReq{at: time.Now(), path: r.URL.Path, lastEventID: r.Header.Get("Last-Event-ID")}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/") {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var b struct {
			User   string
			Active bool
		}
		_ = json.Unmarshal(body, &b)
		rec.user, rec.active = b.User, b.Active
	}
	if rec.path == "/v1/events" {
		rec.user = r.URL.Query().Get("user")
	}
	g.mu.Lock()
	rec.cut = g.cut
	g.reqs = append(g.reqs, rec)
	if g.cut {
		g.mu.Unlock()
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	if rec.path == "/v1/events" {
		ctx, cancel := context.WithCancel(r.Context())
		g.streams[r] = cancel
		r = r.WithContext(ctx)
		defer func() {
			g.mu.Lock()
			delete(g.streams, r)
			g.mu.Unlock()
			cancel()
		}()
	}
	g.mu.Unlock()
	g.next.ServeHTTP(w, r)
}

// setCut cuts the network or restores it. A cut ends the open streams
// and closes every connection, so that no request of the cut goes over a
// connection the browser had used (Chromium resends a request once the
// server closed a reused connection, over another, which is not the
// client's doing).
func (g *gate) setCut(cut bool) {
	g.mu.Lock()
	g.cut = cut
	if cut {
		for _, cancel := range g.streams {
			cancel()
		}
	}
	g.mu.Unlock()
	if cut {
		g.ts.CloseClientConnections()
	}
}

// beats returns the heartbeat requests of user in [from, to).
func (g *gate) beats(user string, from, to time.Time) []gateReq {
	return g.filter(func(r gateReq) bool {
		return r.path == "/v1/heartbeat" && r.user == user && !r.at.Before(from) && r.at.Before(to)
	})
}

func (g *gate) filter(keep func(gateReq) bool) []gateReq {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gateReq
	for _, r := range g.reqs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// TestClientInBrowser drives presence.js (clients/js), through its example
// page at /examples/, in headless Chromium against a server in
// --insecure-dev mode with a web heartbeat interval of one second, behind
// a gate that records the requests and can cut the network. The subtests
// run in order on one server and one browser, each with its own users:
// two tabs are one device with one beating tab; closing that tab hands
// the beats over within an interval; a followed user's change arrives
// once; a network cut of three intervals gives backoff, then recovery
// without a storm, and the follow stream resumes with Last-Event-ID
// missing nothing; an exclusive login elsewhere kicks every tab; a logout
// in one tab logs out all.
func TestClientInBrowser(t *testing.T) {
	bin := chromium(t)
	const interval = time.Second
	cfg := testConfig()
	cfg.Auth = server.AuthConfig{InsecureDev: true}
	cfg.Engine.Intervals = map[core.Kind]time.Duration{core.KindWeb: interval}
	cfg.Engine.IdleAfter = time.Minute
	srv, err := server.New(newStore(t, miniredis.RunT(t).Addr()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = srv.Run(runCtx) }()
	g := &gate{next: srv.Handler(), streams: map[*http.Request]context.CancelFunc{}}
	ts := httptest.NewServer(g)
	g.ts = ts
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		_ = srv.Drain(dctx)
		ts.Close()
		stopRun()
		<-ran
	})
	eng := srv.Engine()
	status := func(user string) core.UserStatus {
		t.Helper()
		st, err := eng.Status(context.Background(), user)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // start the browser
		t.Fatal(err)
	}

	// tab is one page of the browser.
	type tab struct {
		ctx    context.Context
		cancel context.CancelFunc
	}
	top := t
	open := func(t *testing.T, query string) tab {
		t.Helper()
		ctx, cancel := chromedp.NewContext(browser)
		top.Cleanup(cancel)                      // tabs live across the subtests
		if err := chromedp.Do(ctx); err != nil { // open the tab, for the life of ctx
			t.Fatal(err)
		}
		octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
		defer ocancel()
		if err := chromedp.Do(octx, chromedp.Navigate(ts.URL+"/examples/?"+query)); err != nil {
			t.Fatalf("open /examples/?%s: %v", query, err)
		}
		return tab{ctx, cancel}
	}
	poll := func(t *testing.T, tb tab, what, js string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("%s: %v; the page: %s", what, err, evalIn[string](t, tb.ctx, `JSON.stringify({href: location.href, state: document.readyState, hidden: document.hidden, me: document.getElementById('me')?.textContent, presence: !!globalThis.presence, seen: globalThis.seen})`))
		}
	}
	leader := func(t *testing.T, tb tab) bool {
		return evalIn[bool](t, tb.ctx, `!!(globalThis.presence && presence.leader)`)
	}
	seen := func(t *testing.T, tb tab, user, st string) int {
		return evalIn[int](t, tb.ctx, fmt.Sprintf(`seen.filter(([u, s]) => u === %q && s === %q).length`, user, st))
	}
	beatAs := func(user string) {
		t.Helper()
		if _, err := eng.Heartbeat(context.Background(), core.Heartbeat{User: user, Device: "desk", Kind: core.KindDesktop, Active: true}); err != nil {
			t.Fatal(err)
		}
	}
	ivs := func(d time.Duration) string { return fmt.Sprintf("%.2f intervals", float64(d)/float64(interval)) }

	var tabs [2]tab
	t.Run("two tabs are one device with one beating tab", func(t *testing.T) {
		tabs[0] = open(t, "user=u1&friends=&scope=video:10086")
		tabs[1] = open(t, "user=u1&friends=&scope=video:10086")
		for i, tb := range tabs {
			poll(t, tb, fmt.Sprintf("tab %d runs", i), `!!(globalThis.presence && presence.running && presence.stats)`)
		}
		waitFor(t, 10*time.Second, "u1 ONLINE", func() bool { return status("u1").Status == core.StatusOnline })
		from := time.Now()
		time.Sleep(4 * interval)
		n := len(g.beats("u1", from, time.Now()))
		var devices [2]string
		for i, tb := range tabs {
			devices[i] = evalIn[string](t, tb.ctx, `presence.device`)
		}
		l0, l1 := leader(t, tabs[0]), leader(t, tabs[1])
		st := status("u1")
		t.Logf("CLIENT two tabs: device %s and %s, leaders %v and %v, %d heartbeats in 4 intervals, %d devices on the server", devices[0], devices[1], l0, l1, n, len(st.Devices))
		if devices[0] != devices[1] || devices[0] == "" {
			t.Errorf("the tabs have devices %q and %q; want one", devices[0], devices[1])
		}
		if l0 == l1 {
			t.Errorf("leaders %v and %v: want exactly one beating tab", l0, l1)
		}
		if len(st.Devices) != 1 {
			t.Errorf("the server sees %d devices of u1; want 1", len(st.Devices))
		}
		if n < 2 || n > 6 {
			t.Errorf("%d heartbeats in 4 intervals; want about 4 (one tab beating)", n)
		}
		poll(t, tabs[0], "the page shows 1 watching", `document.getElementById('watching').textContent === '1'`)
	})

	t.Run("closing the beating tab hands over within an interval", func(t *testing.T) {
		if tabs[0].ctx == nil {
			t.Skip("no tabs")
		}
		lead, other := tabs[0], tabs[1]
		if !leader(t, lead) {
			lead, other = other, lead
		}
		time.Sleep(interval / 2)
		closed := time.Now()
		lead.cancel()
		poll(t, other, "the other tab leads", `presence.leader`)
		waitFor(t, 5*interval, "a heartbeat from the new leader", func() bool { return len(g.beats("u1", closed, time.Now())) > 0 })
		first := g.beats("u1", closed, time.Now())[0].at
		before := g.beats("u1", closed.Add(-3*interval), closed)
		gap := first.Sub(before[len(before)-1].at)
		t.Logf("CLIENT handover: first beat of the new tab %s after the close, %s after the old tab's last beat", ivs(first.Sub(closed)), ivs(gap))
		if first.Sub(closed) > interval+interval/2 {
			t.Errorf("the new tab beat %s after the close; want within an interval", ivs(first.Sub(closed)))
		}
		if st := status("u1"); st.Status != core.StatusOnline || len(st.Devices) != 1 {
			t.Errorf("after the handover u1 is %s with %d devices; want ONLINE with 1", st.Status, len(st.Devices))
		}
	})

	var follower tab
	t.Run("a followed user's change arrives once", func(t *testing.T) {
		follower = open(t, "user=u2&friends=f-bob,f-carol")
		poll(t, follower, "the snapshot", `seen.filter(([u, s]) => s === 'OFFLINE').length === 2 && follow.ready`)
		beatAs("f-bob")
		poll(t, follower, "f-bob's dot turns ONLINE", `document.querySelector('#friends li[data-user="f-bob"] .dot').dataset.status === 'ONLINE'`)
		time.Sleep(2 * interval)
		if n := seen(t, follower, "f-bob", "ONLINE"); n != 1 {
			t.Errorf("f-bob ONLINE arrived %d times; want once", n)
		}
	})

	t.Run("a network cut of three intervals: backoff, recovery, resume", func(t *testing.T) {
		if follower.ctx == nil {
			t.Skip("no follower")
		}
		poll(t, follower, "u2 beats", `presence.leader && presence.stats.beats > 0`)
		cutAt := time.Now()
		g.setCut(true)
		time.Sleep(interval / 2)
		beatAs("f-carol") // a change while the page is cut off
		time.Sleep(3*interval - interval/2)
		g.setCut(false)
		back := time.Now()
		during := g.beats("u2", cutAt, back)
		streamsDuring := g.filter(func(r gateReq) bool { return r.path == "/v1/events" && r.user == "f-bob" && r.cut })
		var gaps []string
		for i := 1; i < len(during); i++ {
			gaps = append(gaps, during[i].at.Sub(during[i-1].at).Round(10*time.Millisecond).String())
		}
		poll(t, follower, "f-carol's change arrives after the cut", `document.querySelector('#friends li[data-user="f-carol"] .dot').dataset.status === 'ONLINE'`)
		waitFor(t, 10*interval, "a heartbeat of u2 answered after the cut", func() bool { return len(g.beats("u2", back, time.Now())) > 0 })
		recovered := g.beats("u2", back, time.Now())[0].at
		time.Sleep(4 * interval)
		after := g.beats("u2", recovered, recovered.Add(4*interval))
		resumed := g.filter(func(r gateReq) bool { return r.path == "/v1/events" && r.user == "f-bob" && !r.at.Before(back) })
		t.Logf("CLIENT cut: %d heartbeat attempts in 3 intervals of cut (gaps %s), %d stream attempts; first beat %s after the cut ended; %d beats in the 4 intervals after; %d streams reopened, Last-Event-ID %q",
			len(during), strings.Join(gaps, " "), len(streamsDuring), ivs(recovered.Sub(back)), len(after), len(resumed), firstID(resumed))
		if len(during) < 2 || len(during) > 7 {
			t.Errorf("%d heartbeat attempts during the cut; want a few, backing off", len(during))
		}
		if n := len(during); n >= 3 && during[n-1].at.Sub(during[n-2].at) < during[1].at.Sub(during[0].at)-200*time.Millisecond {
			t.Errorf("the retries during the cut did not back off: gaps %s", strings.Join(gaps, " "))
		}
		if len(after) > 6 {
			t.Errorf("%d heartbeats in the 4 intervals after recovery: a storm", len(after))
		}
		if len(resumed) == 0 || resumed[0].lastEventID == "" {
			t.Errorf("the follow stream reopened without Last-Event-ID: %+v", resumed)
		}
		if n := seen(t, follower, "f-carol", "ONLINE"); n != 1 {
			t.Errorf("f-carol ONLINE arrived %d times; want once", n)
		}
		if n := seen(t, follower, "f-bob", "ONLINE"); n != 1 {
			t.Errorf("f-bob ONLINE arrived %d times after the resume; want once", n)
		}
		if st := status("u2"); st.Status != core.StatusOnline {
			t.Errorf("u2 is %s after the recovery; want ONLINE", st.Status)
		}
	})

	t.Run("an exclusive login elsewhere kicks every tab", func(t *testing.T) {
		a, b := open(t, "user=u3&friends="), open(t, "user=u3&friends=")
		poll(t, a, "u3 beats", `presence.running && (presence.leader ? presence.stats.beats > 0 : true)`)
		waitFor(t, 10*time.Second, "u3 ONLINE", func() bool { return status("u3").Status == core.StatusOnline })
		pol := core.PolicyExclusive
		at := time.Now()
		res, err := eng.Login(context.Background(), core.Login{User: "u3", Device: "phone", Kind: core.KindIOS, Policy: &pol})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Kicked) != 1 {
			t.Fatalf("the login kicked %d sessions; want the browser's", len(res.Kicked))
		}
		for _, tb := range []tab{a, b} {
			poll(t, tb, "the page says it was kicked", `document.getElementById('me').dataset.state === 'kicked' && !presence.running`)
		}
		t.Logf("CLIENT kick: both tabs ended their session %s after the login", ivs(time.Since(at)))
		n := len(g.beats("u3", time.Now(), time.Now().Add(time.Hour)))
		time.Sleep(2 * interval)
		if n = len(g.beats("u3", time.Now().Add(-2*interval), time.Now())); n != 0 {
			t.Errorf("%d heartbeats of u3 after the kick; want none", n)
		}
		st := status("u3")
		if len(st.Devices) != 1 || st.Devices[0].ID != "phone" {
			t.Errorf("u3's devices after the kick: %+v; want the phone only", st.Devices)
		}
	})

	t.Run("input in a tab that does not beat marks the next beat active", func(t *testing.T) {
		a, b := open(t, "user=u5&friends="), open(t, "user=u5&friends=")
		poll(t, a, "a tab beats", `presence.running`)
		poll(t, b, "a tab beats", `presence.running`)
		idle := b
		if !leader(t, a) {
			idle = a
		}
		time.Sleep(3 * interval) // the first beats are active: the page just opened
		from := time.Now()
		time.Sleep(2 * interval)
		quiet := g.beats("u5", from, time.Now())
		ctx, cancel := context.WithTimeout(idle.ctx, 10*time.Second)
		defer cancel()
		clicked := time.Now()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("friend"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*interval, "an active beat after the click", func() bool {
			for _, r := range g.beats("u5", clicked, time.Now()) {
				if r.active {
					return true
				}
			}
			return false
		})
		for _, r := range quiet {
			if r.active {
				t.Errorf("a beat of an untouched page was active: %+v", quiet)
				break
			}
		}
		t.Logf("CLIENT activity: %d idle beats inactive; the click in the other tab made a beat active within %s", len(quiet), ivs(time.Since(clicked)))
	})

	t.Run("a logout in one tab logs out all", func(t *testing.T) {
		a, b := open(t, "user=u4&friends="), open(t, "user=u4&friends=")
		waitFor(t, 10*time.Second, "u4 ONLINE", func() bool { return status("u4").Status == core.StatusOnline })
		poll(t, b, "the tab has a session", `presence.running`)
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("logout"))); err != nil {
			t.Fatal(err)
		}
		for _, tb := range []tab{b, a} {
			poll(t, tb, "the page says logged out", `document.getElementById('me').dataset.state === 'logout' && !presence.running`)
		}
		waitFor(t, 5*time.Second, "u4 OFFLINE", func() bool { return status("u4").Status == core.StatusOffline })
	})
}

// firstID is the Last-Event-ID of the first request, or "".
func firstID(reqs []gateReq) string {
	if len(reqs) == 0 {
		return ""
	}
	return reqs[0].lastEventID
}

// evalIn evaluates js in the tab of ctx, awaiting a promise.
func evalIn[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// TestClientTokenRefreshInBrowser runs presence.js in headless Chromium
// against a server that wants JWTs: the token hook first gives an expired
// token, the server answers 401, the hook is asked again with expired =
// true, and the beats and the follow stream (which sends the token in
// Authorization, not in the address) go on with the fresh token.
func TestClientTokenRefreshInBrowser(t *testing.T) {
	bin := chromium(t)
	cfg := testConfig()
	cfg.Engine.Intervals = map[core.Kind]time.Duration{core.KindWeb: time.Second}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	expired, err := server.NewToken(testSecret, server.TokenOptions{User: "jwt-alice", TTL: time.Minute, Now: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	fresh := token(t, "jwt-alice")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(in.url+"/healthz")); err != nil {
		t.Fatal(err)
	}
	got := evalIn[string](t, bctx, fmt.Sprintf(`(async () => {
		const { Presence } = await import("/examples/presence.js");
		const asked = [];
		const p = new Presence({ user: "jwt-alice", token: async (expired) => { asked.push(expired); return expired ? %q : %q; } });
		const beat = new Promise((r) => p.on("beat", r));
		await p.start();
		await beat;
		const seen = [];
		const f = p.follow(["jwt-alice"], (u, s) => seen.push(s));
		await new Promise((r) => p.on("ready", r));
		p.stop();
		return JSON.stringify({ asked, beat: p.stats.beats > 0, seen });
	})()`, fresh, expired))
	t.Logf("CLIENT token refresh: %s", got)
	if want := `{"asked":[false,true],"beat":true,"seen":["ONLINE"]}`; got != want {
		t.Errorf("got %s; want %s", got, want)
	}
}

// TestClientFollowClaimInBrowser opens the example page in headless
// Chromium against a server that wants JWTs, with tokens that carry the
// follow claim and not the read claim: a page whose friends the token
// lists sees their dots change; a page following a user its token does
// not list shows the server's refusal instead of grey dots. It saves a
// screenshot of each page as an artifact.
func TestClientFollowClaimInBrowser(t *testing.T) {
	bin := chromium(t)
	cfg := testConfig()
	cfg.Engine.Intervals = map[core.Kind]time.Duration{core.KindWeb: time.Second}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	_, browser := headless(t, bin, 900, 700)
	dir := artifactDir(t)
	page := func(t *testing.T, query, tok, shotName string) context.Context {
		t.Helper()
		ctx, cancel := chromedp.NewContext(browser)
		t.Cleanup(cancel)
		if err := chromedp.Do(ctx); err != nil { // open the tab, for the life of ctx
			t.Fatal(err)
		}
		octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
		defer ocancel()
		if err := chromedp.Do(octx, chromedp.Navigate(in.url+"/examples/?"+query+"#token="+tok)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { saveShot(t, ctx, filepath.Join(dir, shotName)) })
		return ctx
	}
	pollIn := func(t *testing.T, ctx context.Context, what, js string) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(pctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("%s: %v; the page: %s", what, err, evalIn[string](t, ctx, `document.querySelector('main').innerText`))
		}
	}

	t.Run("a token listing the friends follows them", func(t *testing.T) {
		ctx := page(t, "user=fan&friends=f-bob,f-carol", followToken(t, "fan", "f-bob", "f-carol"), "example-follow.png")
		pollIn(t, ctx, "the snapshot", `follow.ready && seen.length === 2`)
		in.as(t, token(t, "f-bob")).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
		pollIn(t, ctx, "f-bob's dot turns ONLINE", `document.querySelector('#friends li[data-user="f-bob"] .dot').dataset.status === 'ONLINE'`)
		if shown := evalIn[bool](t, ctx, `!document.getElementById('follow-error').hidden`); shown {
			t.Errorf("the page shows a refusal: %s", evalIn[string](t, ctx, `document.getElementById('follow-error').textContent`))
		}
	})

	t.Run("a friend the token does not list shows the refusal", func(t *testing.T) {
		ctx := page(t, "user=fan2&friends=f-bob,f-dave", followToken(t, "fan2", "f-bob"), "example-follow-refused.png")
		pollIn(t, ctx, "the page shows the refusal", `(() => { const p = document.getElementById('follow-error');
			return !p.hidden && p.textContent.includes('HTTP 403') && p.textContent.includes('presence_follow'); })()`)
		dots := evalIn[string](t, ctx, `[...document.querySelectorAll('#friends .dot')].map((d) => d.dataset.status).join(" ")`)
		if dots != "REFUSED REFUSED" {
			t.Errorf("the dots say %q; want REFUSED for both, not grey", dots)
		}
		t.Logf("CLIENT refused follow: %s", evalIn[string](t, ctx, `document.getElementById('follow-error').textContent`))
	})
}

// TestClientManualAndCountInBrowser drives the example page in headless
// Chromium: the new viewer of a video sees herself counted at once, the
// count follows another viewer within its own refresh interval though the
// page touches the video every five minutes, and a DND set on the page is
// back within a heartbeat interval after Redis lost everything (FLUSHALL).
func TestClientManualAndCountInBrowser(t *testing.T) {
	bin := chromium(t)
	const interval = time.Second
	cfg := testConfig()
	cfg.Auth = server.AuthConfig{InsecureDev: true}
	cfg.Engine.Intervals = map[core.Kind]time.Duration{core.KindWeb: interval}
	m := miniredis.RunT(t)
	in := startServer(t, newStore(t, m.Addr()), cfg)
	eng := in.srv.Engine()
	ctx, browser := headless(t, bin, 900, 700)
	if err := chromedp.Do(ctx, chromedp.Navigate(in.url+"/examples/?user=viewer&friends=&scope=video:wall&count_every=300")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { saveShot(t, browser, filepath.Join(artifactDir(t), "example-manual.png")) })
	poll := func(what, js string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("%s: %v; the page: %s", what, err, evalIn[string](t, ctx, `document.querySelector('main').innerText`))
		}
	}
	poll("the new viewer sees herself counted", `document.getElementById('watching').textContent === '1'`)
	sc := core.Scope{Class: "video", ID: "wall"}
	if err := eng.Touch(context.Background(), sc, "another-viewer"); err != nil {
		t.Fatal(err)
	}
	joined := time.Now()
	poll("the count follows another viewer", `document.getElementById('watching').textContent === '2'`)
	t.Logf("CLIENT watching: 1 at once for the new viewer, 2 within %s of another joining (count every 300 ms, touches every 5 min)", time.Since(joined).Round(10*time.Millisecond))

	poll("the page beats", `presence.running && presence.stats.beats > 0`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("dnd"))); err != nil {
		t.Fatal(err)
	}
	status := func() core.Status {
		st, err := eng.Status(context.Background(), "viewer")
		if err != nil {
			t.Fatal(err)
		}
		return st.Status
	}
	waitFor(t, 5*time.Second, "viewer DND", func() bool { return status() == core.StatusDND })
	m.FlushAll()
	lost := time.Now()
	if st := status(); st == core.StatusDND {
		t.Fatalf("after FLUSHALL viewer is still %s", st)
	}
	waitFor(t, 3*interval, "viewer DND again", func() bool { return status() == core.StatusDND })
	t.Logf("CLIENT manual status: DND back %s after FLUSHALL (interval %s)", time.Since(lost).Round(10*time.Millisecond), interval)
	poll("the page says DND", `document.getElementById('manual').textContent === 'DND'`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("clear"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "viewer ONLINE", func() bool { return status() == core.StatusOnline })
	poll("the page says none", `document.getElementById('manual').textContent === 'none' && presence.manual === null`)
}

// TestClientRedisLossInBrowser runs the example page in headless Chromium
// while a real redis-server is killed and restarted empty
// (docs/design.md §11): the page's next beat is told to set its DND
// again, which it does with the rest of its hour; its follow stream gets
// one loss event and no change, and when the loss has healed it reads the
// statuses again and finds nothing changed.
func TestClientRedisLossInBrowser(t *testing.T) {
	bin := chromium(t)
	const interval = time.Second
	cfg := testConfig()
	cfg.Auth = server.AuthConfig{InsecureDev: true}
	cfg.Engine.Intervals = everyInterval(interval) // the healing lasts 2 × the longest
	redis := redistest.Server(t)
	in := startServer(t, newStore(t, redis.Addr), cfg)
	eng := in.srv.Engine()
	ctx, browser := headless(t, bin, 900, 700)
	if err := chromedp.Do(ctx, chromedp.Navigate(in.url+"/examples/?user=viewer&friends=&scope=video:wall")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { saveShot(t, browser, filepath.Join(artifactDir(t), "example-redis-loss.png")) })
	poll := func(what, js string, within time.Duration) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("%s: %v; the page: %s", what, err, evalIn[string](t, ctx, `document.querySelector('main').innerText`))
		}
	}
	poll("the page beats", `presence.running && presence.stats.beats > 0`, 10*time.Second)
	evalIn[bool](t, ctx, `(async () => {
		await presence.setManual("DND", 3600000);
		window.seen = []; window.losses = [];
		presence.on("loss", (l) => losses.push(l));
		const f = presence.follow(["viewer"], (u, s) => seen.push(s));
		await new Promise((r) => presence.on("ready", r));
		return true;
	})()`)
	poll("the follow stream gives DND", `seen.join() === "DND"`, 10*time.Second)
	status := func() core.UserStatus {
		st, err := eng.Status(context.Background(), "viewer")
		if err != nil {
			return core.UserStatus{}
		}
		return st
	}
	until := status().ManualUntil
	redis.Restart()
	lost := time.Now()
	waitFor(t, 5*interval, "viewer DND again", func() bool { return status().Status == core.StatusDND })
	back := time.Since(lost)
	if got := status().ManualUntil; got.Sub(until).Abs() > time.Second {
		t.Fatalf("DND back until %v; want the rest of the hour, until %v", got, until)
	}
	poll("one loss event, then the statuses read again after the healing", `losses.length === 1 && presence.stats.beats > 0`, 10*time.Second)
	time.Sleep(3 * interval) // past the healing's end, when the page reads the statuses again
	if got := evalIn[string](t, ctx, `JSON.stringify({seen, losses: losses.length})`); got != `{"seen":["DND"],"losses":1}` {
		t.Fatalf("the page saw %s; want DND only, and one loss", got)
	}
	t.Logf("CLIENT Redis restarted empty: DND back %s later (interval %s), with its expiry; 1 loss event, 0 changes", back.Round(10*time.Millisecond), interval)
}
