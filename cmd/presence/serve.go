package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/presencekit/presence/cmd/history"
	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
)

// envPrefix starts the environment variable of every serve flag:
// --jwt-secret is PRESENCE_JWT_SECRET. A flag on the command line wins.
const envPrefix = "PRESENCE_"

// serveFlags are the settings of "presence serve".
type serveFlags struct {
	addr, redis, cluster, driver            string
	secret, secretFile                      string
	insecure                                bool
	readClaim, adminClaim, issuer, audience string
	prefix, policy                          string
	changeLog, maxDevices, burst            int
	rate                                    float64
	timeout, drain                          time.Duration
	maxBody                                 int64
	quick, sweep                            bool
	web, mobile, idle, leave, push          time.Duration
	logFormat, logLevel                     string

	// The deadlines and limits of issue 20.
	readHeaderTimeout, readTimeout, writeTimeout, idleTimeout time.Duration
	scopeRate, readRate, streamRate, ipRate                   float64
	scopeBurst, readBurst, streamBurst, ipBurst               int
	maxStreamsPerUser, maxStreams                             int
	corsOrigins, deviceClasses, serviceClaim                  string
	trustedProxies, adminAddr, tlsCert, tlsKey                string
	classClaims                                               string
	jwksURL                                                   string
	jwksRefresh                                               time.Duration

	// The online history of issue 21.
	history, historyUsers          bool
	historyDB                      string
	historyEvery, historyRetention time.Duration
	historyTop                     int
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&f.redis, "redis", "", "redis://[user:password@]host:port[/db] of a Redis server (default: an embedded miniredis, state kept for the life of the process)")
	fs.StringVar(&f.cluster, "redis-cluster", "", "host:port,… seed nodes of a Redis Cluster")
	fs.StringVar(&f.driver, "driver", "goredis", "Redis driver: "+strings.Join(drivers, ", "))
	f.registerSecret(fs)
	fs.BoolVar(&f.insecure, "insecure-dev", false, "accept every request without a token, as an admin (local development only; loopback addresses only)")
	fs.StringVar(&f.readClaim, "read-claim", "presence_read", "JWT claim that allows reading other users' statuses")
	fs.StringVar(&f.adminClaim, "admin-claim", "presence_admin", "JWT claim of admin tokens")
	fs.StringVar(&f.issuer, "jwt-issuer", "", "required JWT issuer (iss), if set")
	fs.StringVar(&f.audience, "jwt-audience", "", "required JWT audience (aud), if set")
	fs.StringVar(&f.jwksURL, "jwks-url", "", "https URL of an identity provider's JWK Set: accept its RS256, ES256 and EdDSA tokens (with or without an HS256 secret)")
	fs.DurationVar(&f.jwksRefresh, "jwks-refresh", 15*time.Minute, "how often the JWK Set is fetched again (a token with an unknown kid also fetches it, at most once a minute)")
	fs.StringVar(&f.prefix, "prefix", "presence", "prefix of every Redis key and channel")
	fs.StringVar(&f.policy, "policy", "multi", "default login policy: multi, exclusive, exclusive-per-kind")
	fs.IntVar(&f.maxDevices, "max-devices", 0, "live devices per user (0: 16)")
	fs.IntVar(&f.changeLog, "change-log", 50000, "changes kept in the Redis change log for reconnecting streams")
	fs.Float64Var(&f.rate, "heartbeat-rate", 5, "heartbeats per second per user (negative: no limit)")
	fs.IntVar(&f.burst, "heartbeat-burst", 20, "heartbeats a user may send at once")
	fs.DurationVar(&f.timeout, "request-timeout", 5*time.Second, "timeout of every request but the event streams")
	fs.Int64Var(&f.maxBody, "max-body", 64<<10, "largest request body in bytes (batch endpoints: 32×)")
	fs.DurationVar(&f.drain, "drain-timeout", 10*time.Second, "how long a graceful shutdown may take")
	fs.BoolVar(&f.sweep, "sweep", true, "run the sweeper in this process (keep it on unless another process sweeps)")
	fs.BoolVar(&f.history, "history", true, "record the online history (online users by status, the busiest scopes) in --history-db every --history-every")
	fs.StringVar(&f.historyDB, "history-db", defaultHistoryDB(), "the online history's database: an SQLite file, or a postgres:// DSN for PostgreSQL")
	fs.DurationVar(&f.historyEvery, "history-every", time.Minute, "the online history's snapshot interval")
	fs.IntVar(&f.historyTop, "history-top", 10, "how many of each scope class's busiest scopes the online history records")
	fs.BoolVar(&f.historyUsers, "history-users", false, "record the list of online users with their status in the online history too")
	fs.DurationVar(&f.historyRetention, "history-retention", 30*24*time.Hour, "how long the online history is kept")
	fs.BoolVar(&f.quick, "quick", false, "short timings for watching the dashboard: web heartbeat 5s, mobile 10s, AWAY after 20s idle, OFFLINE published 3s after leaving")
	fs.DurationVar(&f.web, "interval-web", 0, "heartbeat interval of web, desktop and other devices (0: 30s)")
	fs.DurationVar(&f.mobile, "interval-mobile", 0, "heartbeat interval of ios and android devices (0: 60s)")
	fs.DurationVar(&f.idle, "idle-after", 0, "idle time after which a device is AWAY (0: 5m)")
	fs.DurationVar(&f.leave, "leave-delay", 0, "how long a user must stay offline before OFFLINE is published (0: 15s)")
	fs.DurationVar(&f.push, "push-window", 0, "how long a backgrounded app stays reachable by push (0: 10m)")
	fs.DurationVar(&f.readHeaderTimeout, "read-header-timeout", 5*time.Second, "time to read a request's headers")
	fs.DurationVar(&f.readTimeout, "read-timeout", 10*time.Second, "time to read a whole request, body included (a body that does not arrive is cut off then)")
	fs.DurationVar(&f.writeTimeout, "write-timeout", 0, "time to write an answer, event streams excepted; must exceed --request-timeout (0: --request-timeout + 10s)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 60*time.Second, "how long a kept-alive connection may wait for its next request")
	fs.Float64Var(&f.scopeRate, "scope-rate", 10, "touches and leaves per second per user (negative: no limit)")
	fs.IntVar(&f.scopeBurst, "scope-burst", 50, "touches and leaves a user may send at once")
	fs.Float64Var(&f.readRate, "read-rate", 20, "status, statuses, count and member reads per second per user (negative: no limit)")
	fs.IntVar(&f.readBurst, "read-burst", 100, "reads a user may send at once")
	fs.Float64Var(&f.streamRate, "stream-rate", 1, "event streams opened per second per user (negative: no limit)")
	fs.IntVar(&f.streamBurst, "stream-burst", 10, "event streams a user may open at once")
	fs.Float64Var(&f.ipRate, "ip-rate", 10, "requests per second per client address without a valid token (negative: no limit)")
	fs.IntVar(&f.ipBurst, "ip-burst", 50, "requests without a valid token a client address may send at once")
	fs.IntVar(&f.maxStreamsPerUser, "max-streams-per-user", 8, "event streams (SSE and WebSocket) one user may hold open")
	fs.IntVar(&f.maxStreams, "max-streams", 10000, "event streams this instance holds open in all")
	fs.StringVar(&f.corsOrigins, "cors-origins", "", "origins,… (scheme://host[:port]) whose pages may call the API across origins; other foreign origins are refused")
	fs.StringVar(&f.deviceClasses, "device-classes", "", "scope classes,… that count devices: a user may touch them as USER/DEVICE for a live device of its own")
	fs.StringVar(&f.serviceClaim, "service-claim", "presence_service", "JWT claim of service tokens, which act for any user (gateways)")
	fs.StringVar(&f.classClaims, "class-claims", "", "class=claim,… scope classes only tokens with the claim may touch, leave, count and list")
	fs.StringVar(&f.trustedProxies, "trusted-proxies", "", "CIDRs,… of the proxies whose X-Forwarded-For names the client (default: none, the peer is the client)")
	fs.StringVar(&f.adminAddr, "admin-addr", "", "listen address of an operators' listener serving /metrics, /v1/admin/*, /healthz and /readyz without a token (keep it private)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate (chain) file: serve HTTPS (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
}

func (f *serveFlags) registerSecret(fs *flag.FlagSet) {
	fs.StringVar(&f.secret, "jwt-secret", "", "HS256 secret of client tokens, at least 32 bytes (prefer PRESENCE_JWT_SECRET or --jwt-secret-file)")
	fs.StringVar(&f.secretFile, "jwt-secret-file", "", "file holding the HS256 secret")
}

// secretBytes reads the secret from the flag or the file.
func (f *serveFlags) secretBytes() ([]byte, error) {
	switch {
	case f.secret != "" && f.secretFile != "":
		return nil, usageError{msg: "--jwt-secret and --jwt-secret-file exclude each other"}
	case f.secretFile != "":
		b, err := os.ReadFile(f.secretFile)
		if err != nil {
			return nil, usageError{msg: fmt.Sprintf("--jwt-secret-file: %v", err)}
		}
		return []byte(strings.TrimRight(string(b), "\r\n")), nil
	}
	return []byte(f.secret), nil
}

// runServe is "presence serve": the HTTP service with live events and a
// dashboard; "presence serve token" prints a client token.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "token" {
		return runServeToken(args[1:], stdout)
	}
	fs := newCLI("serve", "presence serve [flags]\n       presence serve token --user ID [flags]", `
Runs the HTTP service: a JSON API under /v1/ (heartbeats, logins, statuses,
scope counts), live change events (/v1/events as SSE, /v1/ws as WebSocket), a
dashboard at /dashboard/, /healthz, /readyz and /metrics. Clients sign in with
HS256 tokens ('presence serve token' prints one) or an identity provider's
RS256, ES256 or EdDSA tokens (--jwks-url); --insecure-dev serves
without them, on loopback only. State lives in Redis (--redis,
--redis-cluster), or in an embedded miniredis for the life of the process.
Every flag may also be set by the environment: --jwt-secret as
`+envPrefix+`JWT_SECRET, and so on; the command line wins.`)
	fs.env = true
	var f serveFlags
	f.register(fs.FlagSet)
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := f.config(log)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usageError{msg: fmt.Sprintf("--addr %q: %v", f.addr, err)}
	}
	if f.insecure && !isLoopback(host) {
		return usageError{msg: fmt.Sprintf("--insecure-dev serves loopback addresses only, not %q", f.addr)}
	}
	var cluster []string
	if f.cluster != "" {
		cluster = strings.Split(f.cluster, ",")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	var srvRef atomic.Pointer[server.Server]
	be, err := openDriver(ctx, f.redis, cluster, f.driver, func(hit bool) {
		if s := srvRef.Load(); s != nil {
			s.Metrics().CacheRead(hit)
		}
	})
	if err != nil {
		return err
	}
	defer be.close()
	// Connected: from now on the driver's complaints (a lost connection, a
	// pool that cannot dial) are worth the operator's eye, in serve's log,
	// once an interval per message (each dial repeats them during an outage).
	driverLog.Store(server.ThrottledLogger(log, cfg.FailureLogEvery))
	defer driverLog.Store(nil)
	cfg.Backend = be.desc
	srv, err := server.New(be.store, cfg)
	if err != nil {
		return err
	}
	srvRef.Store(srv)
	var tlsCfg *tls.Config
	if f.tlsCert != "" || f.tlsKey != "" {
		if f.tlsCert == "" || f.tlsKey == "" {
			return usageError{msg: "--tls-cert and --tls-key go together"}
		}
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return usageError{msg: fmt.Sprintf("--tls-cert/--tls-key: %v", err)}
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
		url = "https://" + ln.Addr().String()
	}
	if f.adminAddr != "" {
		aln, err := net.Listen("tcp", f.adminAddr)
		if err != nil {
			ln.Close()
			return err
		}
		ahs := srv.HTTPServer()
		ahs.Handler = srv.AdminHandler()
		go func() { _ = ahs.Serve(aln) }()
		defer ahs.Close()
		log.Info("presence: operators' listener", "url", "http://"+aln.Addr().String(), "serves", "/metrics /v1/admin/* /healthz /readyz")
	}
	if f.insecure {
		log.Warn("INSECURE DEV MODE: every request is accepted WITHOUT A TOKEN, as an admin. Never expose this server; set PRESENCE_JWT_SECRET for real use.")
	}
	if be.mini != nil {
		log.Warn("presence: state is kept in an embedded miniredis for the life of this process only; it is lost when the process exits (use --redis to keep it)")
	}
	if f.history {
		db := f.historyDB
		if u, err := neturl.Parse(db); err == nil && u.User != nil {
			db = u.Redacted()
		}
		log.Info("presence: recording the online history", "db", db, "every", f.historyEvery, "retention", f.historyRetention)
	}
	log.Info("presence: serving", "url", url, "dashboard", url+"/dashboard/", "backend", be.desc, "auth", map[bool]string{true: "insecure-dev", false: "jwt"}[f.insecure])
	fmt.Fprintf(stdout, "presence serve: dashboard at %s/dashboard/ (API under %s/v1/)\n", url, url)
	return srv.Serve(ctx, ln)
}

// config builds the server configuration from the flags.
func (f *serveFlags) config(log *slog.Logger) (server.Config, error) {
	secret, err := f.secretBytes()
	if err != nil {
		return server.Config{}, err
	}
	if len(secret) == 0 && f.jwksURL == "" && !f.insecure {
		return server.Config{}, usageError{msg: "no JWT secret: set PRESENCE_JWT_SECRET (or --jwt-secret-file) or --jwks-url, or run with --insecure-dev for local development"}
	}
	if f.jwksRefresh <= 0 {
		return server.Config{}, usageError{msg: "--jwks-refresh must be positive"}
	}
	policy, ok := core.Parse[core.Policy](f.policy)
	if !ok {
		return server.Config{}, usageError{msg: fmt.Sprintf("--policy %q: want multi, exclusive or exclusive-per-kind", f.policy)}
	}
	if f.changeLog < 1 {
		return server.Config{}, usageError{msg: "--change-log must be at least 1: the event streams resume from it"}
	}
	if f.maxBody < 1 {
		return server.Config{}, usageError{msg: "--max-body must be positive"}
	}
	eng := core.Config{Prefix: f.prefix, Policy: policy, MaxDevices: f.maxDevices, ChangeLog: f.changeLog,
		IdleAfter: f.idle, LeaveDelay: f.leave, PushWindow: f.push}
	web, mobile := f.web, f.mobile
	if f.quick {
		web, mobile = or(web, 5*time.Second), or(mobile, 10*time.Second)
		eng.IdleAfter, eng.LeaveDelay, eng.PushWindow = or(eng.IdleAfter, 20*time.Second), or(eng.LeaveDelay, 3*time.Second), or(eng.PushWindow, time.Minute)
	}
	if web > 0 || mobile > 0 {
		eng.Intervals = map[core.Kind]time.Duration{}
		if web > 0 {
			eng.Intervals[core.KindWeb], eng.Intervals[core.KindDesktop], eng.Intervals[core.KindOther] = web, web, web
		}
		if mobile > 0 {
			eng.Intervals[core.KindIOS], eng.Intervals[core.KindAndroid] = mobile, mobile
		}
	}
	cfg := server.Config{
		Engine: eng,
		Auth: server.AuthConfig{Secret: secret, InsecureDev: f.insecure, ReadClaim: f.readClaim, AdminClaim: f.adminClaim,
			Issuer: f.issuer, Audience: f.audience, JWKSURL: f.jwksURL, JWKSRefresh: f.jwksRefresh},
		Logger: log, RequestTimeout: f.timeout, MaxBody: f.maxBody, MaxBatchBody: 32 * f.maxBody,
		HeartbeatRate: f.rate, HeartbeatBurst: f.burst, DrainTimeout: f.drain,
		ReadHeaderTimeout: f.readHeaderTimeout, ReadTimeout: f.readTimeout, WriteTimeout: f.writeTimeout, IdleTimeout: f.idleTimeout,
		ScopeRate: f.scopeRate, ScopeBurst: f.scopeBurst, ReadRate: f.readRate, ReadBurst: f.readBurst,
		StreamRate: f.streamRate, StreamBurst: f.streamBurst, IPRate: f.ipRate, IPBurst: f.ipBurst,
		MaxStreamsPerUser: f.maxStreamsPerUser, MaxStreams: f.maxStreams,
		CORSOrigins: splitList(f.corsOrigins), DeviceClasses: splitList(f.deviceClasses), TrustedProxies: splitList(f.trustedProxies),
	}
	cfg.Auth.ServiceClaim = f.serviceClaim
	for _, kv := range splitList(f.classClaims) {
		class, claim, ok := strings.Cut(kv, "=")
		if !ok || class == "" || claim == "" {
			return server.Config{}, usageError{msg: fmt.Sprintf("--class-claims %q: want class=claim,…", f.classClaims)}
		}
		if cfg.ClassClaims == nil {
			cfg.ClassClaims = map[string]string{}
		}
		cfg.ClassClaims[class] = claim
	}
	for name, d := range map[string]time.Duration{"--read-header-timeout": f.readHeaderTimeout, "--read-timeout": f.readTimeout,
		"--idle-timeout": f.idleTimeout, "--request-timeout": f.timeout} {
		if d <= 0 {
			return server.Config{}, usageError{msg: name + " must be positive"}
		}
	}
	if f.writeTimeout < 0 || (f.writeTimeout > 0 && f.writeTimeout <= f.timeout) {
		return server.Config{}, usageError{msg: "--write-timeout must exceed --request-timeout, or a timed-out request gets no answer"}
	}
	for name, n := range map[string]int{"--scope-burst": f.scopeBurst, "--read-burst": f.readBurst, "--stream-burst": f.streamBurst,
		"--ip-burst": f.ipBurst, "--max-streams-per-user": f.maxStreamsPerUser, "--max-streams": f.maxStreams} {
		if n < 1 {
			return server.Config{}, usageError{msg: name + " must be at least 1"}
		}
	}
	for name, r := range map[string]float64{"--scope-rate": f.scopeRate, "--read-rate": f.readRate, "--stream-rate": f.streamRate, "--ip-rate": f.ipRate} {
		if r == 0 {
			return server.Config{}, usageError{msg: name + " must not be 0 (negative: no limit)"}
		}
	}
	if !f.sweep {
		cfg.SweepUsers, cfg.SweepScopes = -1, -1
	}
	if f.history {
		if f.historyDB == "" || f.historyEvery < time.Second || f.historyTop < 1 || f.historyRetention <= 0 {
			return server.Config{}, usageError{msg: "--history needs --history-db, --history-every of at least 1s, --history-top of at least 1 and a positive --history-retention (or --history=false)"}
		}
		cfg.History = history.Config{DSN: f.historyDB, Every: f.historyEvery, TopN: f.historyTop, Users: f.historyUsers,
			Retention: f.historyRetention}
	}
	return cfg, nil
}

func or(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{msg: fmt.Sprintf("--log-level %q: want debug, info, warn or error", level)}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError{msg: fmt.Sprintf("--log-format %q: want text or json", format)}
}

// runServeToken is "presence serve token": it prints a token signed with
// the configured secret, for trying the API.
func runServeToken(args []string, stdout io.Writer) error {
	fs := newCLI("serve token", "presence serve token --user ID [flags]", `
Prints a client token for the API of 'presence serve': an HS256 JWT signed
with the service's secret (`+envPrefix+`JWT_SECRET or --jwt-secret-file), for
the user --user, with the admin or read claim on request. Flags may also be
set by the environment, as for serve.`)
	fs.env = true
	var f serveFlags
	f.registerSecret(fs.FlagSet)
	user := fs.String("user", "", "the token's subject (required)")
	admin := fs.Bool("admin", false, "grant the admin claim")
	read := fs.Bool("read", false, "grant the read claim")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	adminClaim := fs.String("admin-claim", "presence_admin", "name of the admin claim")
	readClaim := fs.String("read-claim", "presence_read", "name of the read claim")
	issuer := fs.String("jwt-issuer", "", "issuer (iss)")
	audience := fs.String("jwt-audience", "", "audience (aud)")
	follow := fs.String("follow", "", "comma-separated user IDs the token may read without --read (the presence_follow claim)")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	secret, err := f.secretBytes()
	if err != nil {
		return err
	}
	if len(secret) == 0 {
		return fs.usageError("no secret: set PRESENCE_JWT_SECRET or --jwt-secret-file")
	}
	if *user == "" {
		return fs.usageError("--user is required")
	}
	o := server.TokenOptions{User: *user, TTL: *ttl, Issuer: *issuer, Audience: *audience}
	if *admin {
		o.Claims = append(o.Claims, *adminClaim)
	}
	if *read {
		o.Claims = append(o.Claims, *readClaim)
	}
	if *follow != "" {
		o.Follow = strings.Split(*follow, ",")
	}
	tok, err := server.NewToken(secret, o)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}

// defaultHistoryDB is the SQLite file presence serve records its online
// history in unless --history-db names another: presence/history.db in the
// user's state directory ($XDG_STATE_HOME, else ~/.local/state), never the
// working directory, which is often a source checkout.
func defaultHistoryDB() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(os.TempDir(), "presence", "history.db")
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "presence", "history.db")
}
