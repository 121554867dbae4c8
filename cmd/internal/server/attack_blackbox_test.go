package server_test

// The black-box attack suite of issue 20: each case speaks HTTP to a
// running service, knowing only its address, the JWT secret its tokens are
// signed with and the Redis it uses (started here, so a case can take it
// away), and reads only what the service logs. It runs two ways:
//
//   - by default, the short form: each case against this package's server,
//     in process on a loopback port, with short deadlines and small
//     numbers (a few seconds in all, in the ordinary go test run);
//   - with -attack-bin=PATH, the full form: each case starts that
//     `presence serve` binary (settings through PRESENCE_* variables, which
//     a binary without the setting ignores) with its defaults, at the
//     issue's sizes. Built from the commit before the issue 20 work, every
//     case fails; built from main, every case passes. See
//     cmd/bench/results/2026-12-01-attack-suite.md.
//
// Every case is loopback only and bounded: at most 500 connections, 60 s.
// Each logs its figure on a line starting "ATTACK".

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"

	"github.com/presencekit/presence/cmd/internal/server"
)

var attackBin = flag.String("attack-bin", "", "run TestAttack's full form against this `presence` binary, started for each case (default: the short form, in process)")

// attackSizes are how hard each case pushes.
type attackSizes struct {
	silent      int           // connections whose body never arrives
	touches     int           // touches back to back
	reads       int           // status reads back to back
	streams     int           // streams opened by one user (SSE, then WebSocket)
	outageUsers int           // users beating while Redis is down
	outage      time.Duration // how long Redis is down
	beatEvery   time.Duration // each of those users' heartbeat interval
	probes      int           // tokenless requests per client address
}

// sizes are the numbers for the full form (but 100 streams of a
// kind, not 500: enough to show a cap or its absence), smaller ones for
// the short form.
func sizes() attackSizes {
	if *attackBin != "" {
		return attackSizes{silent: 100, touches: 300, reads: 300, streams: 100, outageUsers: 100,
			outage: 10 * time.Second, beatEvery: 250 * time.Millisecond, probes: 100}
	}
	// Past the default bursts (touches 50, reads 100, streams 8 held and
	// 10 opened, tokenless requests 50), which the short form refills
	// hardly at all.
	return attackSizes{silent: 20, touches: 60, reads: 110, streams: 12, outageUsers: 10,
		outage: time.Second, beatEvery: 100 * time.Millisecond, probes: 55}
}

// attackOptions are the deployment settings a case needs.
type attackOptions struct {
	insecureDev    bool
	corsOrigins    string // PRESENCE_CORS_ORIGINS
	trustedProxies string // PRESENCE_TRUSTED_PROXIES
	jwksURL        string // PRESENCE_JWKS_URL
	tls            bool   // PRESENCE_TLS_CERT, PRESENCE_TLS_KEY: a certificate for 127.0.0.1
}

// attackTarget is a running service as a case sees it.
type attackTarget struct {
	url       string
	addr      string
	client    *http.Client // trusts the target's certificate
	redisAddr string
	mr        *miniredis.Miniredis
	logs      func() string // everything the service logged so far
	// bodyDeadline is the read timeout the service runs with: the
	// documented default (10 s) for a binary, 1 s in process.
	bodyDeadline time.Duration
	// reconcile is how often the dashboard re-reads statuses.
	reconcile time.Duration
}

// startTarget starts a service for one case: the -attack-bin binary, or
// this package's server in process.
func startTarget(t *testing.T, o attackOptions) *attackTarget {
	t.Helper()
	mr := miniredis.RunT(t)
	tg := &attackTarget{redisAddr: mr.Addr(), mr: mr, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	t.Cleanup(tg.client.CloseIdleConnections)
	var tlsCfg *tls.Config
	var certFile, keyFile string
	if o.tls {
		tlsCfg, certFile, keyFile = selfSigned(t)
		pool := x509.NewCertPool()
		pool.AddCert(tlsCfg.Certificates[0].Leaf)
		tg.client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	scheme := "http"
	if o.tls {
		scheme = "https"
	}
	if *attackBin != "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tg.addr = ln.Addr().String()
		ln.Close()
		env := []string{}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PRESENCE_") {
				env = append(env, kv)
			}
		}
		env = append(env, "PRESENCE_ADDR="+tg.addr, "PRESENCE_REDIS=redis://"+mr.Addr()+"/0")
		args := []string{"serve"}
		if o.insecureDev {
			args = append(args, "--insecure-dev")
		} else {
			env = append(env, "PRESENCE_JWT_SECRET="+string(testSecret))
		}
		for k, v := range map[string]string{"CORS_ORIGINS": o.corsOrigins, "TRUSTED_PROXIES": o.trustedProxies,
			"JWKS_URL": o.jwksURL, "TLS_CERT": certFile, "TLS_KEY": keyFile} {
			if v != "" {
				env = append(env, "PRESENCE_"+k+"="+v)
			}
		}
		var out lockedBuffer
		cmd := exec.Command(*attackBin, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
		tg.logs, tg.bodyDeadline, tg.reconcile = out.String, 10*time.Second, 10*time.Second
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := net.Dial("tcp", tg.addr)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				t.Fatalf("%s serve exited: %s", *attackBin, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s serve does not listen on %s: %s", *attackBin, tg.addr, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	} else {
		var out lockedBuffer
		cfg := testConfig()
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
		cfg.Backend = "redis at " + mr.Addr()
		cfg.ReadTimeout, cfg.FailureLogEvery = time.Second, time.Second
		// The default background timings but the dashboard's (seventeen
		// services share the machine, under -race).
		cfg.PollInterval, cfg.SweepUsers, cfg.SweepScopes, cfg.ScopeRefresh = 0, 0, 0, 0
		cfg.ReconcileEvery = 500 * time.Millisecond
		// The default bursts, refilled too slowly to matter however slow
		// the machine (a binary keeps the default rates: its cases run
		// alone, fast enough to outrun them).
		cfg.ScopeRate, cfg.ReadRate, cfg.StreamRate, cfg.IPRate = 0.001, 0.001, 0.001, 0.001
		if o.insecureDev {
			cfg.Auth = server.AuthConfig{InsecureDev: true}
		}
		cfg.Auth.JWKSURL = o.jwksURL
		cfg.CORSOrigins = splitNonEmpty(o.corsOrigins)
		cfg.TrustedProxies = splitNonEmpty(o.trustedProxies)
		// A client that gives up on a dead Redis at once (the defaults dial
		// five times, 100 ms apart, and retry the command thrice).
		rc := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
		t.Cleanup(func() { rc.Close() })
		srv, err := server.New(goredis.New(rc), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tg.addr = ln.Addr().String()
		if tlsCfg != nil {
			ln = tls.NewListener(ln, tlsCfg)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(ctx, ln) }()
		t.Cleanup(func() { cancel(); <-served })
		tg.logs, tg.bodyDeadline, tg.reconcile = out.String, cfg.ReadTimeout, cfg.ReconcileEvery
	}
	tg.url = scheme + "://" + tg.addr
	// Ready, or not (a binary without TLS never answers https: the case
	// reports it).
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if res, err := tg.client.Get(tg.url + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
	}
	return tg
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// selfSigned returns a TLS configuration with a certificate for
// 127.0.0.1, and the certificate and key as PEM files.
func selfSigned(t *testing.T) (*tls.Config, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	if os.WriteFile(certFile, certPEM, 0o600) != nil || os.WriteFile(keyFile, keyPEM, 0o600) != nil {
		t.Fatal("writing the certificate")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, certFile, keyFile
}

// answer is one request's outcome.
type answer struct {
	code int
	hdr  http.Header
	body string
	err  error
}

// do sends one request: tok as the bearer token if not empty, body as is
// (no Content-Type unless hdr sets one).
func (tg *attackTarget) do(method, path, tok, body string, hdr map[string]string) answer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, tg.url+path, rd)
	if err != nil {
		return answer{err: err}
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := tg.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return answer{code: res.StatusCode, hdr: res.Header, body: string(raw)}
}

// logMsg finds a text log line's message.
var logMsg = regexp.MustCompile(`msg=("(?:[^"\\]|\\.)*"|\S+)`)

var jsonCT = map[string]string{"Content-Type": "application/json"}

// must sends a request and fails the test unless it is answered 200.
func (tg *attackTarget) must(t *testing.T, method, path, tok, body string, out any) {
	t.Helper()
	a := tg.do(method, path, tok, body, jsonCT)
	if a.err != nil || a.code != http.StatusOK {
		t.Fatalf("%s %s: %d %v %s", method, path, a.code, a.err, a.body)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(a.body), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, a.body)
		}
	}
}

// count returns a scope's count, read with an admin token.
func (tg *attackTarget) count(t *testing.T, scope string) int64 {
	t.Helper()
	var c server.CountResponse
	tg.must(t, "GET", "/v1/scopes/"+scope+"/count", token(t, "ops", "presence_admin"), "", &c)
	return c.Count
}

// figure logs a case's measure, the line the results table quotes.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("ATTACK %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

// TestAttack runs the black-box attack cases, one service each: in
// process (the short form) or, with -attack-bin, a `presence serve` binary
// (the full form).
func TestAttack(t *testing.T) {
	sz := sizes()
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			if *attackBin == "" {
				t.Parallel() // in process the cases are light; a binary gets the machine
			}
			f(t)
		})
	}

	// 1. A request whose body never arrives.
	run("1-body-never-arrives", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		limit := tg.bodyDeadline + 5*time.Second
		tok := token(t, "alice")
		var wg sync.WaitGroup
		var mu sync.Mutex
		held, statuses := 0, map[string]int{}
		for i := range sz.silent {
			wg.Go(func() {
				use := ""
				if i%2 == 0 {
					use = tok
				}
				_, st, err := silentBody(tg.addr, use, limit)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					held++
				}
				statuses[st]++
			})
		}
		wg.Wait()
		figure(t, "%d of %d connections (half without a token) still held after %v; answers %v", held, sz.silent, limit, statuses)
		if held > 0 {
			t.Errorf("%d connections held open", held)
		}
	})

	// 2. Touching and leaving others' members; the touch budget.
	run("2a-scope-inflation", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		tok := token(t, "alice")
		ok := 0
		for i := range sz.touches {
			if a := tg.do("POST", "/v1/scopes/room/hot2/touch", tok, `{"member":"alice/`+strconv.Itoa(i)+`"}`, jsonCT); a.code == http.StatusOK {
				ok++
			}
		}
		n := tg.count(t, "room/hot2")
		figure(t, "%d touches as alice/<i>: %d accepted, room:hot2 counts %d", sz.touches, ok, n)
		if n > 1 || ok > 0 {
			t.Errorf("alice inflated room:hot2 to %d", n)
		}
	})
	run("2b-leave-another-user", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		x := tg.do("POST", "/v1/scopes/room/lobby/touch", token(t, "alice/x"), "", jsonCT)
		before := tg.count(t, "room/lobby")
		a := tg.do("POST", "/v1/scopes/room/lobby/leave", token(t, "alice"), `{"member":"alice/x"}`, jsonCT)
		after := tg.count(t, "room/lobby")
		figure(t, "the token of user alice/x touching: %d %s; alice leaving member alice/x: %d %s; room:lobby %d → %d",
			x.code, errCode(x.body), a.code, strings.TrimSpace(a.body), before, after)
		if a.code == http.StatusOK || after != before {
			t.Errorf("alice removed alice/x from room:lobby")
		}
	})
	run("2c-touch-rate", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		tok := token(t, "alice")
		ok, first := 0, 0
		var retry string
		for i := 1; i <= sz.touches; i++ {
			a := tg.do("POST", "/v1/scopes/room/r/touch", tok, "", jsonCT)
			if a.code == http.StatusOK {
				ok++
			} else if a.code == http.StatusTooManyRequests && first == 0 {
				first, retry = i, a.hdr.Get("Retry-After")
			}
		}
		figure(t, "%d of %d touches back to back accepted; first 429 at #%d (Retry-After %q)", ok, sz.touches, first, retry)
		if first == 0 || retry == "" {
			t.Error("touches are not rate-limited")
		}
	})

	// 3. A page on another origin writing without a JSON Content-Type.
	run("3-cross-site-write", func(t *testing.T) {
		tg := startTarget(t, attackOptions{insecureDev: true})
		body := `{"user":"victim","device":"d","kind":"web","active":true}`
		evil := map[string]string{"Origin": "https://evil.example"}
		bare := tg.do("POST", "/v1/heartbeat", "", body, evil) // fetch(…, {mode: "no-cors", body: new Blob([…])})
		evil["Content-Type"] = "text/plain;charset=UTF-8"
		text := tg.do("POST", "/v1/heartbeat", "", body, evil)
		var st server.UserStatus
		tg.must(t, "GET", "/v1/users/victim/status", "", "", &st)
		figure(t, "no Content-Type: %d, text/plain: %d (Origin https://evil.example); victim is %s", bare.code, text.code, st.Status)
		if bare.code == http.StatusOK || text.code == http.StatusOK || st.Status != "OFFLINE" {
			t.Error("a cross-site page changed state")
		}
	})

	// 4. Streams and reads of one user.
	run("4a-sse-streams", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		tok := token(t, "alice")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ok, codes := 0, map[int]int{}
		for range sz.streams {
			req, _ := http.NewRequestWithContext(ctx, "GET", tg.url+"/v1/events?snapshot=0", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			res, err := tg.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			codes[res.StatusCode]++
			if res.StatusCode == http.StatusOK {
				ok++
				defer res.Body.Close()
			} else {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}
		figure(t, "%d of %d SSE streams of one user accepted; answers %v", ok, sz.streams, codes)
		if ok > 10 || codes[http.StatusTooManyRequests] == 0 {
			t.Error("one user opened streams without a cap")
		}
	})
	run("4b-websockets", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		tok := token(t, "alice")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		ok, codes := 0, map[int]int{}
		for range sz.streams {
			ws, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tg.url, "http")+"/v1/ws?snapshot=0",
				&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
			if res != nil {
				codes[res.StatusCode]++
			}
			if err == nil {
				ok++
				defer ws.CloseNow()
			}
		}
		figure(t, "%d of %d WebSockets of one user accepted; answers %v", ok, sz.streams, codes)
		if ok > 10 || codes[http.StatusTooManyRequests] == 0 {
			t.Error("one user opened WebSockets without a cap")
		}
	})
	run("4c-read-rate", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		tok := token(t, "alice")
		ok, first := 0, 0
		for i := 1; i <= sz.reads; i++ {
			a := tg.do("GET", "/v1/users/alice/status", tok, "", nil)
			if a.code == http.StatusOK {
				ok++
			} else if a.code == http.StatusTooManyRequests && first == 0 {
				first = i
			}
		}
		figure(t, "%d of %d status reads back to back answered 200; first 429 at #%d", ok, sz.reads, first)
		if first == 0 {
			t.Error("status reads are not rate-limited")
		}
	})

	// 5. ttl_ms overflow.
	run("5-ttl-overflow", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		a := tg.do("PUT", "/v1/users/alice/manual", token(t, "alice"), `{"status":"DND","ttl_ms":9223372036854775807}`, jsonCT)
		var er server.ErrorResponse
		_ = json.Unmarshal([]byte(a.body), &er)
		figure(t, "%d %s", a.code, strings.TrimSpace(a.body))
		if a.code != http.StatusBadRequest || er.Error == nil || er.Error.Field != "ttl_ms" || strings.Contains(a.body, "-1ms") {
			t.Error("ttl_ms overflows")
		}
	})

	// 6. A Redis outage under load: the log and Retry-After.
	run("6-outage", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		toks := make([]string, sz.outageUsers)
		for i := range toks {
			toks[i] = token(t, "user"+strconv.Itoa(i))
			tg.must(t, "POST", "/v1/heartbeat", toks[i], `{"device":"d"}`, nil)
		}
		time.Sleep(500 * time.Millisecond)
		from := len(tg.logs())
		tg.mr.Close()
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes, noRetry := map[int]int{}, 0
		for _, tok := range toks {
			wg.Go(func() {
				for time.Since(start) < sz.outage {
					a := tg.do("POST", "/v1/heartbeat", tok, `{"device":"d"}`, jsonCT)
					mu.Lock()
					codes[a.code]++
					if a.code == http.StatusServiceUnavailable && a.hdr.Get("Retry-After") == "" {
						noRetry++
					}
					mu.Unlock()
					time.Sleep(sz.beatEvery)
				}
			})
		}
		wg.Wait()
		time.Sleep(500 * time.Millisecond) // the last lines
		warn, loose, byMsg := 0, 0, map[string]int{}
		for _, l := range strings.Split(tg.logs()[from:], "\n") {
			switch {
			case l == "":
			case !strings.HasPrefix(l, "time="):
				loose++
				if loose <= 3 {
					t.Logf("unstructured: %.200s", l)
				}
			case strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR"):
				warn++
				if m := logMsg.FindStringSubmatch(l); m != nil {
					byMsg[m[1]]++
				}
			}
		}
		if err := tg.mr.Restart(); err != nil { // the service stops faster with its Redis back
			t.Log(err)
		}
		figure(t, "%d users beating for %v without Redis: answers %v, %d 503s without Retry-After; log: %d WARN/ERROR lines, %d unstructured lines",
			sz.outageUsers, sz.outage, codes, noRetry, warn, loose)
		t.Logf("WARN/ERROR lines by message: %v", byMsg)
		if codes[http.StatusServiceUnavailable] == 0 || noRetry > 0 || warn > 30 || loose > 0 {
			t.Error("the outage floods the log or its 503s lack Retry-After")
		}
	})

	// 7. The dashboard's "since".
	run("7-dashboard-since", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		at := map[string]int64{}
		for _, u := range []string{"alice", "bob"} {
			tok := token(t, u)
			s := openSSE(t, tg.url, "/v1/events?snapshot=0", tok, nil)
			s.next(t, server.EventReady, within)
			tg.must(t, "POST", "/v1/heartbeat", tok, `{"device":"d","kind":"web","active":true}`, nil)
			at[u] = decode[server.Change](t, s.next(t, server.EventChange, 10*time.Second)).At
			time.Sleep(300 * time.Millisecond)
		}
		admin := token(t, "ops", "presence_admin")
		var ov server.OverviewResponse
		waitFor(t, 3*tg.reconcile+5*time.Second, "a reconcile after the changes", func() bool {
			tg.must(t, "GET", "/v1/admin/overview", admin, "", &ov)
			return ov.Users.ReconciledAt > at["bob"]+500
		})
		got := map[string]int64{}
		for _, r := range ov.Users.Recent {
			got[r.User] = r.At
		}
		figure(t, "since: alice %d (changed at %d), bob %d (changed at %d); reconciled at %d",
			got["alice"], at["alice"], got["bob"], at["bob"], ov.Users.ReconciledAt)
		if got["alice"] != at["alice"] || got["bob"] != at["bob"] {
			t.Error("the dashboard's since is not when the user entered its status")
		}
	})

	// 8. A real deployment.
	run("8a-cors-preflight", func(t *testing.T) {
		tg := startTarget(t, attackOptions{corsOrigins: "https://app.example.com"})
		a := tg.do("OPTIONS", "/v1/heartbeat", "", "", map[string]string{"Origin": "https://app.example.com",
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
		f := tg.do("OPTIONS", "/v1/heartbeat", "", "", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
		figure(t, "preflight from a listed origin: %d, Allow-Origin %q, Allow-Headers %q; from another: %d, Allow-Origin %q",
			a.code, a.hdr.Get("Access-Control-Allow-Origin"), a.hdr.Get("Access-Control-Allow-Headers"), f.code, f.hdr.Get("Access-Control-Allow-Origin"))
		if a.code != http.StatusNoContent || a.hdr.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
			!strings.Contains(a.hdr.Get("Access-Control-Allow-Headers"), "Content-Type") || f.hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Error("no CORS")
		}
	})
	run("8b-tls", func(t *testing.T) {
		tg := startTarget(t, attackOptions{tls: true})
		a := tg.do("GET", "/healthz", "", "", nil)
		figure(t, "GET https://…/healthz: %d %v", a.code, a.err)
		if a.err != nil || a.code != http.StatusOK {
			t.Error("no TLS")
		}
	})
	run("8c-x-forwarded-for", func(t *testing.T) {
		budget := func(tg *attackTarget, xff func(i int) string) int {
			for i := range sz.probes {
				if a := tg.do("GET", "/v1/info", "", "", map[string]string{"X-Forwarded-For": xff(i)}); a.code == http.StatusTooManyRequests {
					return i
				}
			}
			return sz.probes
		}
		tg := startTarget(t, attackOptions{trustedProxies: "127.0.0.0/8"})
		a := budget(tg, func(int) string { return "198.51.100.1" })
		b := tg.do("GET", "/v1/info", "", "", map[string]string{"X-Forwarded-For": "198.51.100.2"})
		spoof := budget(startTarget(t, attackOptions{}), func(i int) string { return "203.0.113." + strconv.Itoa(i%250) })
		figure(t, "behind a trusted proxy, client 198.51.100.1: %d of %d tokenless requests answered before a 429, then 198.51.100.2: %d; "+
			"an untrusted peer varying X-Forwarded-For: %d of %d", a, sz.probes, b.code, spoof, sz.probes)
		if a == sz.probes || b.code != http.StatusOK || spoof == sz.probes {
			t.Error("X-Forwarded-For is not handled")
		}
	})
	run("8d-metrics", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		none := tg.do("GET", "/metrics", "", "", nil)
		user := tg.do("GET", "/metrics", token(t, "alice"), "", nil)
		admin := tg.do("GET", "/metrics", token(t, "ops", "presence_admin"), "", nil)
		figure(t, "/metrics without a token: %d, a user's token: %d, an admin's: %d", none.code, user.code, admin.code)
		if none.code == http.StatusOK || user.code == http.StatusOK || admin.code != http.StatusOK {
			t.Error("/metrics is open")
		}
	})
	run("8e-info-internals", func(t *testing.T) {
		tg := startTarget(t, attackOptions{})
		a := tg.do("GET", "/v1/info", "", "", nil)
		var info server.InfoResponse
		_ = json.Unmarshal([]byte(a.body), &info)
		figure(t, "/v1/info without a token: %d, backend %q", a.code, info.Backend)
		if a.code != http.StatusOK || strings.Contains(a.body, tg.redisAddr) {
			t.Error("/v1/info shows the Redis address")
		}
	})
	run("8f-jwks", func(t *testing.T) {
		keys := []idpKey{rsaKey(t, "r1", 2048), ecKey(t, "e1", elliptic.P256(), jwt.SigningMethodES256), edKey(t, "d1")}
		p := newIDP(t, keys...)
		tg := startTarget(t, attackOptions{jwksURL: p.url})
		codes, bad := []string{}, 0
		for _, k := range keys {
			a := tg.do("GET", "/v1/users/alice/status", k.sign(t, "alice"), "", nil)
			codes = append(codes, fmt.Sprintf("%s %d", k.method.Alg(), a.code))
			if a.code != http.StatusOK {
				bad++
			}
		}
		figure(t, "identity provider tokens: %s", strings.Join(codes, ", "))
		if bad > 0 {
			t.Error("an identity provider's tokens are refused")
		}
	})
}
