package main

import (
	"bufio"
	"bytes"
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
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeInsecureDev runs "presence serve --insecure-dev" as a fresh
// clone would: it serves the dashboard and the API on an embedded Redis,
// says so loudly, and stops cleanly when its context ends.
func TestServeInsecureDev(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0"}, outW, &stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no start-up line: %v; stderr:\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, outR)
	_, rest, ok := strings.Cut(line, "dashboard at ")
	dashboard, _, _ := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(dashboard, "http://127.0.0.1:") {
		t.Fatalf("start-up line %q", line)
	}
	res, err := http.Get(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "presence dashboard") {
		t.Fatalf("dashboard: %d", res.StatusCode)
	}
	base := strings.TrimSuffix(dashboard, "/dashboard/")
	res, err = http.Post(base+"/v1/heartbeat", "application/json", strings.NewReader(`{"user":"alice","device":"d","kind":"web"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("heartbeat: %d", res.StatusCode)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	for _, want := range []string{"INSECURE DEV MODE", "embedded miniredis", "for the life of this process"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, stderr.String())
		}
	}
}

// TestServeRefuses checks the command lines serve refuses, with exit code 2.
func TestServeRefuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no secret", []string{"serve"}, nil, "no JWT secret"},
		{"insecure on all interfaces", []string{"serve", "--insecure-dev", "--addr", "0.0.0.0:0"}, nil, "loopback addresses only"},
		{"unknown driver", []string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--driver", "nope"}, nil, "--driver"},
		{"bad environment", []string{"serve"}, map[string]string{"PRESENCE_HEARTBEAT_RATE": "fast"}, "PRESENCE_HEARTBEAT_RATE"},
		{"driver from the environment", []string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0"}, map[string]string{"PRESENCE_DRIVER": "nope"}, "--driver"},
		{"short secret", []string{"serve", "--addr", "127.0.0.1:0"}, map[string]string{"PRESENCE_JWT_SECRET": "short"}, "at least 32 bytes"},
		{"both redis flags", []string{"serve", "--insecure-dev", "--redis", "redis://127.0.0.1:1", "--redis-cluster", "127.0.0.1:2"}, nil, "exclude each other"},
		{"bad policy", []string{"serve", "--insecure-dev", "--policy", "solo"}, nil, "--policy"},
		{"write timeout under the request timeout", []string{"serve", "--insecure-dev", "--write-timeout", "1s"}, nil, "--write-timeout"},
		{"zero read timeout", []string{"serve", "--insecure-dev", "--read-timeout", "0"}, nil, "--read-timeout"},
		{"zero stream cap", []string{"serve", "--insecure-dev", "--max-streams-per-user", "0"}, nil, "--max-streams-per-user"},
		{"bad CORS origin", []string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--cors-origins", "app.example.com/x"}, nil, "CORS origin"},
		{"TLS certificate without a key", []string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--tls-cert", "cert.pem"}, nil, "go together"},
		{"bad class claims", []string{"serve", "--insecure-dev", "--class-claims", "video"}, nil, "--class-claims"},
		{"unknown device class", []string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--device-classes", "nosuch"}, nil, "no scope class"},
		{"bad trusted proxy", []string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--trusted-proxies", "10.0.0.0/33"}, nil, "trusted proxy"},
		{"JWKS over plain http", []string{"serve", "--addr", "127.0.0.1:0", "--jwks-url", "http://idp.example.com/jwks"}, nil, "must be https"},
		{"unreachable JWKS", []string{"serve", "--addr", "127.0.0.1:0", "--jwks-url", "http://" + unreachable + "/jwks"}, nil, "cannot fetch the JWKS"},
		{"zero JWKS refresh", []string{"serve", "--addr", "127.0.0.1:0", "--jwks-url", "https://idp.example.com/jwks", "--jwks-refresh", "0"}, nil, "--jwks-refresh"},
		{"token without user", []string{"serve", "token"}, map[string]string{"PRESENCE_JWT_SECRET": strings.Repeat("s", 32)}, "-user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			c := run(context.Background(), tc.args, &stdout, &stderr)
			if c == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want a failure mentioning %q", c, stderr.String(), tc.want)
			}
		})
	}
}

// TestServeLimitFlags checks that the deadline and limit flags reach the
// server's configuration, and their defaults.
func TestServeLimitFlags(t *testing.T) {
	parse := func(args ...string) server.Config {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		var f serveFlags
		f.register(fs)
		if err := fs.Parse(append([]string{"--insecure-dev"}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	def := parse()
	if def.ReadHeaderTimeout != 5*time.Second || def.ReadTimeout != 10*time.Second || def.IdleTimeout != time.Minute ||
		def.MaxStreamsPerUser != 8 || def.MaxStreams != 10000 || def.CORSOrigins != nil || def.Auth.ServiceClaim != "presence_service" {
		t.Fatalf("defaults: %+v", def)
	}
	cfg := parse("--read-header-timeout", "2s", "--read-timeout", "3s", "--write-timeout", "20s", "--idle-timeout", "30s",
		"--scope-rate", "1", "--scope-burst", "2", "--read-rate", "3", "--read-burst", "4", "--stream-rate", "-1", "--stream-burst", "6",
		"--ip-rate", "7", "--ip-burst", "8", "--max-streams-per-user", "2", "--max-streams", "100",
		"--cors-origins", "https://a.example, https://b.example:8443", "--device-classes", "call,video", "--service-claim", "gw",
		"--class-claims", "video=pv,room=pr")
	if cfg.ReadHeaderTimeout != 2*time.Second || cfg.ReadTimeout != 3*time.Second || cfg.WriteTimeout != 20*time.Second || cfg.IdleTimeout != 30*time.Second ||
		cfg.ScopeRate != 1 || cfg.ScopeBurst != 2 || cfg.ReadRate != 3 || cfg.ReadBurst != 4 || cfg.StreamRate != -1 || cfg.StreamBurst != 6 ||
		cfg.IPRate != 7 || cfg.IPBurst != 8 || cfg.MaxStreamsPerUser != 2 || cfg.MaxStreams != 100 ||
		strings.Join(cfg.CORSOrigins, " ") != "https://a.example https://b.example:8443" || strings.Join(cfg.DeviceClasses, " ") != "call video" ||
		cfg.Auth.ServiceClaim != "gw" || cfg.ClassClaims["video"] != "pv" || cfg.ClassClaims["room"] != "pr" || len(cfg.ClassClaims) != 2 {
		t.Fatalf("flags: %+v", cfg)
	}
}

// TestServeToken checks that "presence serve token" signs a token the
// server accepts: subject, expiry and the asked claims.
func TestServeToken(t *testing.T) {
	secret := strings.Repeat("k", 40)
	t.Setenv("PRESENCE_JWT_SECRET", secret)
	var stdout, stderr bytes.Buffer
	if c := run(context.Background(), []string{"serve", "token", "-user", "alice", "-admin", "-ttl", "5m"}, &stdout, &stderr); c != 0 {
		t.Fatalf("exit %d: %s", c, stderr.String())
	}
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()).
		ParseWithClaims(strings.TrimSpace(stdout.String()), claims, func(*jwt.Token) (any, error) { return []byte(secret), nil })
	if err != nil {
		t.Fatal(err)
	}
	if claims["sub"] != "alice" || claims["presence_admin"] != true || claims["presence_read"] != nil {
		t.Fatalf("claims %v", claims)
	}
}

// TestOpenDriver checks every driver on the embedded miniredis and on a
// real server: heartbeat, status, and a pub/sub feed, which the event
// hub needs.
func TestOpenDriver(t *testing.T) {
	targets := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"embedded", func(*testing.T) string { return "" }},
		{"redis-server", func(t *testing.T) string { return "redis://" + redistest.Server(t).Addr }},
	}
	for _, target := range targets {
		for _, driver := range drivers {
			t.Run(target.name+"/"+driver, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				be, err := openDriver(ctx, target.url(t), nil, driver, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer be.close()
				if !strings.Contains(be.desc, driver) {
					t.Errorf("description %q does not name the driver", be.desc)
				}
				eng, err := core.New(be.store, core.Config{Prefix: "servetest-" + driver, CoalesceWindow: -1})
				if err != nil {
					t.Fatal(err)
				}
				feed, err := eng.Subscribe(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer feed.Close()
				if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "d"}); err != nil {
					t.Fatal(err)
				}
				ev, err := feed.Next(ctx)
				if err != nil || ev.Change == nil || ev.Change.To != core.StatusOnline {
					t.Fatalf("feed: %+v %v", ev, err)
				}
				if st, err := eng.Status(ctx, "alice"); err != nil || st.Status != core.StatusOnline {
					t.Fatalf("status: %+v %v", st, err)
				}
			})
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379":         "redis://127.0.0.1:6379",
		"redis://:secret@host:6379/0":    "redis://:xxxxx@host:6379/0",
		"rediss://user:p%40ss@host:6380": "rediss://user:xxxxx@host:6380",
		"host:6379":                      "host:6379",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestServeTLSAndAdminAddr runs serve with --tls-cert/--tls-key and an
// operators' listener: the API answers over HTTPS, /metrics needs an
// admin token there (in JWT mode) and none on --admin-addr.
func TestServeTLSAndAdminAddr(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "presence test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	secret := strings.Repeat("k", 40)
	t.Setenv("PRESENCE_JWT_SECRET", secret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile,
			"--admin-addr", "127.0.0.1:0", "--log-format", "json"}, outW, &stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no start-up line: %v; stderr:\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, outR)
	_, rest, _ := strings.Cut(line, "dashboard at ")
	base, _, _ := strings.Cut(rest, "/dashboard/")
	if !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("start-up line %q", line)
	}
	adminURL := ""
	for _, l := range strings.Split(stderr.String(), "\n") {
		var rec struct{ Msg, URL string }
		if json.Unmarshal([]byte(l), &rec) == nil && strings.Contains(rec.Msg, "operators' listener") {
			adminURL = rec.URL
		}
	}
	if adminURL == "" {
		t.Fatalf("no operators' listener in the log:\n%s", stderr.String())
	}
	status := func(c *http.Client, url, tok string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	admin, err := server.NewToken([]byte(secret), server.TokenOptions{User: "ops", Claims: []string{"presence_admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := status(client, base+"/healthz", ""); c != 200 {
		t.Fatalf("/healthz over HTTPS: %d", c)
	}
	if c := status(client, base+"/metrics", ""); c != http.StatusUnauthorized {
		t.Fatalf("/metrics over HTTPS without a token: %d", c)
	}
	if c := status(client, base+"/metrics", admin); c != 200 {
		t.Fatalf("/metrics over HTTPS with an admin token: %d", c)
	}
	if c := status(http.DefaultClient, adminURL+"/metrics", ""); c != 200 {
		t.Fatalf("/metrics on --admin-addr: %d", c)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestDefaultHistoryDB: the online history's default file is in the user's
// state directory, never in the working directory (a source checkout).
func TestDefaultHistoryDB(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, tc := range []struct {
		name, state, want string
	}{
		{"XDG_STATE_HOME unset", "", filepath.Join(home, ".local", "state", "presence", "history.db")},
		{"XDG_STATE_HOME set", filepath.Join(home, "st"), filepath.Join(home, "st", "presence", "history.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_STATE_HOME", tc.state)
			got := defaultHistoryDB()
			if got != tc.want {
				t.Fatalf("defaultHistoryDB() = %q, want %q", got, tc.want)
			}
		})
	}
}
