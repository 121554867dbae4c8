package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/presencekit/presence/cmd/internal/server"
)

// mainEnv makes the test binary run main instead of the tests, so that
// tests can run the command as a process: its real stderr (where a
// driver's default logger would write) and its exit status.
const mainEnv = "PRESENCE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
	}
	// presence serve records its online history in ./presence-history.db
	// by default: keep the tests' out of the source tree.
	if os.Getenv("PRESENCE_HISTORY_DB") == "" {
		dir, err := os.MkdirTemp("", "presence-cli-test-")
		if err != nil {
			panic(err)
		}
		os.Setenv("PRESENCE_HISTORY_DB", filepath.Join(dir, "history.db"))
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// runProcess runs "presence args..." as a process and returns its stdout,
// stderr and exit code.
func runProcess(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("presence %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// runInProcess runs "presence args..." through run.
func runInProcess(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// subcommands are every subcommand's name as typed, with the flags its
// help must list and a default it must show.
var subcommands = []struct {
	cmd     []string
	flags   []string
	deflt   string
	badFlag []string // a valid flag with a value it refuses
}{
	{[]string{"bench"}, []string{"redis", "allow-miniredis", "adapters", "only", "concurrency", "batch-concurrency",
		"batch", "duration", "users", "memory-items", "backlogs", "stall-devices", "stall-members", "shard-size", "brief", "clock", "json", "quiet", "markdown",
		"cpuprofile", "memprofile"}, `(default "server")`, []string{"--concurrency", "many"}},
	{[]string{"conform"}, []string{"redis", "sequences", "steps", "race", "seed", "adapters", "no-client-cache"},
		"(default 2000)", []string{"--race", "long"}},
	{[]string{"demo"}, []string{"redis", "viewers"}, "(default 10000)", []string{"--viewers", "lots"}},
	{[]string{"serve"}, []string{"addr", "redis", "redis-cluster", "driver", "jwt-secret", "jwt-secret-file",
		"insecure-dev", "read-claim", "admin-claim", "jwt-issuer", "jwt-audience", "prefix", "policy", "max-devices",
		"change-log", "heartbeat-rate", "heartbeat-burst", "request-timeout", "max-body", "drain-timeout", "sweep",
		"quick", "interval-web", "interval-mobile", "idle-after", "leave-delay", "push-window", "log-format",
		"log-level", "read-header-timeout", "read-timeout", "write-timeout", "idle-timeout", "scope-rate", "scope-burst",
		"read-rate", "read-burst", "stream-rate", "stream-burst", "ip-rate", "ip-burst", "max-streams-per-user",
		"max-streams", "cors-origins", "device-classes", "service-claim", "trusted-proxies", "admin-addr", "tls-cert",
		"tls-key", "class-claims", "jwks-url", "jwks-refresh", "history", "history-db", "history-every", "history-top",
		"history-users", "history-retention"}, `(default "127.0.0.1:8080")`, []string{"--heartbeat-rate", "fast"}},
	{[]string{"serve", "token"}, []string{"user", "admin", "read", "ttl", "admin-claim", "read-claim", "jwt-issuer",
		"jwt-audience", "follow", "jwt-secret", "jwt-secret-file"}, "(default 1h0m0s)", []string{"--ttl", "forever"}},
	{[]string{"history"}, []string{"url", "token", "db", "since", "to", "step", "scope", "format"}, "(default 24h0m0s)",
		[]string{"--step", "often"}},
	{[]string{"sim"}, []string{"seed", "users", "edges", "duration", "tick", "sweep", "census", "engine", "wasm",
		"redis", "out", "quiet", "cpuprofile", "mix"}, "(default 1h0m0s)", []string{"--users", "ten"}},
}

// TestHelp: every way of asking for help exits 0 and prints, on stdout,
// the usage line, what the command does and every flag with its default.
func TestHelp(t *testing.T) {
	for _, sc := range subcommands {
		name := strings.Join(sc.cmd, " ")
		for _, args := range [][]string{
			append(append([]string{}, sc.cmd...), "--help"),
			append(append([]string{}, sc.cmd...), "-h"),
			append([]string{"help"}, sc.cmd...),
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				stdout, stderr, code := runInProcess(args...)
				if code != 0 || stderr != "" {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				if !strings.HasPrefix(stdout, "usage: presence "+name) {
					t.Errorf("no usage line:\n%s", stdout)
				}
				// The description: a paragraph between the usage and the flags.
				_, rest, _ := strings.Cut(stdout, "\n\n")
				about, _, _ := strings.Cut(rest, "\n\nflags:\n")
				if len(about) < 100 {
					t.Errorf("no description of what %s does:\n%s", name, stdout)
				}
				for _, f := range sc.flags {
					if !strings.Contains(stdout, "\n  --"+f+" ") && !strings.Contains(stdout, "\n  --"+f+"\n") {
						t.Errorf("flag --%s not listed:\n%s", f, stdout)
					}
				}
				if got, want := strings.Count(stdout, "\n  --"), len(sc.flags); got != want {
					t.Errorf("%d flags listed, want %d:\n%s", got, want, stdout)
				}
				if !strings.Contains(stdout, sc.deflt) {
					t.Errorf("no %q:\n%s", sc.deflt, stdout)
				}
			})
		}
	}
}

// TestTopLevelHelp: "presence help", --help and -h list every subcommand
// and exit 0; no command at all, or an unknown one, is a usage error.
func TestTopLevelHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		stdout, stderr, code := runInProcess(args...)
		if code != 0 || stderr != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
		for _, c := range commands() {
			if !strings.Contains(stdout, "\n  "+c.name+" ") {
				t.Errorf("%v: %s not listed:\n%s", args, c.name, stdout)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: presence <command>"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"help", "nope"}, `unknown command "nope"`},
	} {
		stdout, stderr, code := runInProcess(tc.args...)
		if code != 2 || stdout != "" || strings.Count(stderr, tc.want) != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q once on stderr", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// TestBadFlags: an unknown flag, a bad value or a stray argument exits 2
// with the error printed once, then a hint at the command's help, and
// nothing else (not the whole usage).
func TestBadFlags(t *testing.T) {
	type badCase struct {
		args []string
		want string
	}
	var cases []badCase
	for _, sc := range subcommands {
		with := func(extra ...string) []string { return append(append([]string{}, sc.cmd...), extra...) }
		cases = append(cases,
			badCase{with("--bogus"), "unknown flag --bogus"},
			badCase{with("-bogus=1"), "unknown flag --bogus"},
			badCase{with("stray"), `unexpected argument "stray"`},
			badCase{with(sc.badFlag...), `invalid value "` + sc.badFlag[1] + `" for flag ` + sc.badFlag[0]},
			badCase{with(sc.badFlag[0]), "flag needs an argument: " + sc.badFlag[0]},
		)
	}
	// Values the flag package accepts and the command refuses.
	cases = append(cases,
		badCase{[]string{"demo", "--viewers", "0"}, "--viewers must be 1 to 1000000"},
		badCase{[]string{"history", "--format", "xml"}, `--format "xml": want table or csv`},
		badCase{[]string{"history", "--scope", "lobby"}, `--scope "lobby": want class:id`},
		badCase{[]string{"sim", "--engine", "jvm"}, `--engine "jvm": want wasm or native`},
		badCase{[]string{"sim", "--edges", "65"}, "--edges must be 1 to 64"},
		badCase{[]string{"sim", "--tick", "1500us"}, "--tick must be whole milliseconds"},
		badCase{[]string{"sim", "--mix", "nonsense=1"}, `invalid value "nonsense=1" for flag --mix`},
		badCase{[]string{"conform", "--adapters", "jedis"}, `unknown adapter "jedis"`},
		badCase{[]string{"conform", "--redis", "http://x"}, "want redis://host:port"},
		badCase{[]string{"bench", "--redis", "redis://127.0.0.1:1", "--clock", "sundial"}, `--clock "sundial"`},
		badCase{[]string{"bench", "--redis", "redis://127.0.0.1:1", "--only", "latency"}, `unknown group "latency"`},
		badCase{[]string{"bench", "--redis", "redis://127.0.0.1:1", "--adapters", "jedis"}, `unknown adapter "jedis"`},
		badCase{[]string{"bench"}, "--redis is required"},
		badCase{[]string{"serve", "--insecure-dev", "--policy", "solo"}, `--policy "solo"`},
		badCase{[]string{"demo", "--redis", "redis://127.0.0.1:1/x"}, "invalid database number"},
	)
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runInProcess(tc.args...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and nothing on stdout", code, stdout, stderr)
			}
			cmd := tc.args[0]
			if len(tc.args) > 1 && tc.args[0] == "serve" && tc.args[1] == "token" {
				cmd = "serve token"
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "presence "+cmd+": ") ||
				strings.Count(stderr, tc.want) != 1 || !strings.Contains(lines[0], tc.want) ||
				lines[1] != "run 'presence "+cmd+" --help' for usage" {
				t.Fatalf("stderr:\n%s\nwant the error with %q once, then the hint at 'presence %s --help'", stderr, tc.want, cmd)
			}
		})
	}
}

// unreachable is a loopback port nothing listens on.
const unreachable = "127.0.0.1:1"

// TestUnreachableRedis: a Redis that refuses connections is one line on
// stderr and exit 1, for every command that takes one, with every driver
// serve offers: no driver log line before it, no progress (sim connects
// before it builds its module), no table (conform pings before its suite,
// and does not call a refused connection a conformance failure).
func TestUnreachableRedis(t *testing.T) {
	url := "redis://" + unreachable
	tests := [][]string{
		{"demo", "--redis", url},
		{"sim", "--redis", url},
		{"conform", "--redis", url},
		{"bench", "--redis", url},
	}
	for _, d := range drivers {
		tests = append(tests,
			[]string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--driver", d, "--redis", url},
			[]string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--driver", d, "--redis-cluster", unreachable})
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runProcess(t, args...)
			want := "presence " + args[0] + ": cannot reach Redis at " + unreachable + ": connection refused\n"
			if code != 1 || stdout != "" || stderr != want {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1, no stdout and stderr %q", code, stdout, stderr, want)
			}
		})
	}
}

// TestUnreachableJWKS: an identity provider's JWK Set that cannot be
// fetched at start-up is one line on stderr naming the URL and the cause,
// and exit 1, before anything is served.
func TestUnreachableJWKS(t *testing.T) {
	url := "http://" + unreachable + "/jwks"
	stdout, stderr, code := runInProcess("serve", "--addr", "127.0.0.1:0", "--jwks-url", url)
	want := "presence serve: server: cannot fetch the JWKS at " + url + ": dial tcp " + unreachable + ": connect: connection refused\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1, no stdout and stderr %q", code, stdout, stderr, want)
	}
}

// TestExitCodes checks the process's exit status, which run's callers
// (main) turn its result into.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"demo", "--help"}, 0},
		{[]string{"help", "sim"}, 0},
		{[]string{"demo", "--bogus"}, 2},
		{[]string{"sim", "--bogus"}, 2},
		{nil, 2},
	} {
		if _, stderr, code := runProcess(t, tc.args...); code != tc.code {
			t.Errorf("%v: exit %d, want %d; stderr %q", tc.args, code, tc.code, stderr)
		}
	}
}

// TestDriverLog: go-redis' lines go to driverLog through log/slog, as
// warnings naming the driver, and nowhere while it is unset.
func TestDriverLog(t *testing.T) {
	var b bytes.Buffer
	driverLog.Store(slog.New(slog.NewTextHandler(&b, nil)))
	defer driverLog.Store(nil)
	goredisLog{}.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
	if got := b.String(); !strings.Contains(got, `level=WARN msg="redis: connection pool: failed to dial after 5 attempts" driver=go-redis`) {
		t.Errorf("logged %q", got)
	}
	// serve stores a throttled logger: a dial failure repeated during an
	// outage is one line an interval.
	b.Reset()
	driverLog.Store(server.ThrottledLogger(slog.New(slog.NewTextHandler(&b, nil)), time.Hour))
	for range 100 {
		goredisLog{}.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
	}
	if n := strings.Count(b.String(), "failed to dial"); n != 1 {
		t.Errorf("100 repeated driver lines logged %d times through the throttled logger", n)
	}
	driverLog.Store(nil)
	goredisLog{}.Printf(context.Background(), "dropped") // must not panic
}

// TestServeEnvironment: a bad PRESENCE_* variable is a usage error, but
// does not stand in the way of --help.
func TestServeEnvironment(t *testing.T) {
	t.Setenv("PRESENCE_HEARTBEAT_RATE", "fast")
	if stdout, stderr, code := runInProcess("serve", "--help"); code != 0 || !strings.HasPrefix(stdout, "usage: presence serve") {
		t.Errorf("--help: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code := runInProcess("serve", "--insecure-dev")
	if code != 2 || strings.Count(stderr, `PRESENCE_HEARTBEAT_RATE="fast"`) != 1 || !strings.HasSuffix(stderr, "run 'presence serve --help' for usage\n") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestReachError: how a failed first contact with Redis reads.
func TestReachError(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		err  error
		want string
	}{
		{refused, "cannot reach Redis at h:1: connection refused"},
		{fmt.Errorf("presence: redis unavailable: %w", refused), "cannot reach Redis at h:1: connection refused"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}},
			"cannot reach Redis at h:1: looking up h: no such host"},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, "cannot reach Redis at h:1: no answer in time"},
		{context.DeadlineExceeded, "cannot reach Redis at h:1: no answer in time"},
		{errors.New("WRONGPASS invalid username-password pair"), "Redis at h:1: WRONGPASS invalid username-password pair"},
		{errors.New("redisc: all nodes failed\nfirst\nsecond"), "Redis at h:1: redisc: all nodes failed; first; second"},
	}
	for _, tc := range tests {
		if got := reachError("h:1", tc.err).Error(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestSilentRedis: a server that accepts connections and never answers is
// reported as unreachable, once the driver gives up.
func TestSilentRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, stderr, code := runInProcess("demo", "--redis", "redis://"+ln.Addr().String())
	want := "presence demo: cannot reach Redis at " + ln.Addr().String() + ": no answer in time\n"
	if code != 1 || stderr != want {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
}
