package redistest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Timeouts of the helpers. A node that is not up by then fails the test with
// its log.
const (
	startTimeout = 10 * time.Second
	stopTimeout  = 5 * time.Second
	maxAttempts  = 8
	logName      = "redis.log"
)

// errPortInUse means redis-server could not bind its port (or, in cluster
// mode, its bus port): someone took it between the check and the start.
var errPortInUse = errors.New("redistest: port in use")

// Instance is one redis-server process on 127.0.0.1. Its methods other than
// Addr and Port must be called from the test's goroutine, as they may fail
// the test.
type Instance struct {
	// Addr is "127.0.0.1:PORT", ready for a client.
	Addr string
	// Port is the TCP port the server listens on; it stays the same across
	// Restart.
	Port int

	tb   testing.TB
	bin  string
	dir  string
	args []string

	mu   sync.Mutex
	proc *process
}

// process is one run of redis-server.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returns
	log    *os.File
}

// Server starts a single redis-server on a free 127.0.0.1 port, with no
// persistence (--save "" --appendonly no) and a temporary directory of its
// own, waits until it answers, and stops it when the test ends. args are
// appended to the command line and so override the defaults, for example
// Server(t, "--maxmemory", "1mb"). The binary comes from the directory named
// by PRESENCE_REDIS_BIN, or from PATH where that is unset; Server skips the
// test where it is not there.
func Server(tb testing.TB, args ...string) *Instance {
	tb.Helper()
	bin := lookPath(tb, "redis-server", "redis-server not installed; skipping real-server test")
	return launch(tb, bin, args, false)
}

// launch starts redis-server on a fresh port, retrying with another port
// when the chosen one turns out to be taken.
func launch(tb testing.TB, bin string, args []string, cluster bool) *Instance {
	tb.Helper()
	dir := tb.TempDir()
	var lastErr error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		port, err := freePort(cluster)
		if err != nil {
			lastErr = err
			continue
		}
		i := &Instance{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Port: port,
			tb:   tb,
			bin:  bin,
			dir:  dir,
			args: args,
		}
		err = i.start()
		if errors.Is(err, errPortInUse) {
			lastErr = err
			continue
		}
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		tb.Cleanup(i.Stop)
		return i
	}
	tb.Fatalf("redistest: no free port after %d attempts: %v", maxAttempts, lastErr)
	return nil
}

// binEnv names the environment variable that chooses the server the tests
// run on: a directory holding redis-server and redis-cli (a Redis or Valkey
// build of one's choosing). Unset, the binaries come from PATH.
const binEnv = "PRESENCE_REDIS_BIN"

// lookPath returns the path of name, from binEnv's directory where that is
// set and from PATH otherwise, or skips the test with one line saying why.
func lookPath(tb testing.TB, name, msg string) string {
	tb.Helper()
	p, err := binPath(name)
	if err != nil {
		if errors.Is(err, errNotInstalled) {
			tb.Skip(msg)
		}
		tb.Skip(err.Error())
	}
	return p
}

// errNotInstalled means binEnv is unset and name is not on PATH.
var errNotInstalled = errors.New("redistest: not installed")

// binPath resolves name as lookPath does. A directory named in binEnv that
// lacks name is an error of its own, naming the variable and the path, so
// that a lane set up wrong does not quietly run on PATH's server instead.
func binPath(name string) (string, error) {
	dir := os.Getenv(binEnv)
	if dir == "" {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%w: %s", errNotInstalled, name)
		}
		return p, nil
	}
	if !filepath.IsAbs(dir) {
		// go test runs each package in its own directory, so a relative
		// path would name a different place for every package.
		return "", fmt.Errorf("redistest: %s=%s is not an absolute path; skipping real-server test", binEnv, dir)
	}
	p := filepath.Join(dir, name)
	st, err := os.Stat(p)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("redistest: %s=%s has no executable %s; skipping real-server test", binEnv, dir, p)
	}
	return p, nil
}

// freePort returns a port on 127.0.0.1 that was free a moment ago. A cluster
// node also needs PORT+10000 for its bus, so cluster ports are drawn from
// 20000–29999 (bus 30000–39999) rather than from the kernel's ephemeral range.
// 6379 (and its bus port) is never returned: a developer's own server may be
// there.
func freePort(cluster bool) (int, error) {
	if !cluster {
		for range 10 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return 0, err
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			if port != 6379 && port != 16379 {
				return port, nil
			}
		}
		return 0, errors.New("redistest: kernel keeps offering 6379")
	}
	for range 50 {
		port := 20000 + rand.IntN(10000)
		if canBind(port) && canBind(port+10000) {
			return port, nil
		}
	}
	return 0, errors.New("redistest: no free port pair in 20000–39999")
}

func canBind(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// start launches redis-server on i.Port and waits until it answers, checking
// by pid that the answer comes from this very process.
func (i *Instance) start() error {
	logPath := filepath.Join(i.dir, logName)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "--- redistest: starting on port %d at %s ---\n", i.Port, time.Now().Format(time.RFC3339Nano))
	args := append([]string{
		"--port", strconv.Itoa(i.Port),
		"--bind", "127.0.0.1",
		"--dir", i.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "",
	}, i.args...)
	cmd := exec.Command(i.bin, args...)
	cmd.Dir = i.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", i.bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), log: logf}
	go func() {
		cmd.Wait()
		logf.Close()
		close(p.exited)
	}()

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-p.exited:
			log := i.Log()
			if strings.Contains(log, "Address already in use") {
				return errPortInUse
			}
			return fmt.Errorf("redis-server on port %d exited during start-up (%v); log:\n%s", i.Port, cmd.ProcessState, log)
		default:
		}
		// Ask for the pid, not just PING: during a race for the port the
		// answer may come from another test's server.
		if reply, err := Do(i.Addr, "INFO", "server"); err == nil && infoField(fmt.Sprint(reply), "process_id") == strconv.Itoa(cmd.Process.Pid) {
			i.mu.Lock()
			i.proc = p
			i.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-p.exited
			return fmt.Errorf("redis-server on port %d did not answer within %v; log:\n%s", i.Port, startTimeout, i.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pid returns the process ID of the running server, or 0 once it was stopped
// or killed.
func (i *Instance) Pid() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.proc == nil {
		return 0
	}
	return i.proc.cmd.Process.Pid
}

// Dir returns the server's working directory, a temporary directory that the
// test removes at its end.
func (i *Instance) Dir() string { return i.dir }

// Log returns what the server has written to its log so far, across
// restarts.
func (i *Instance) Log() string {
	b, err := os.ReadFile(filepath.Join(i.dir, logName))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(b)
}

// Do sends one command to the server on a fresh connection; see the
// package-level Do.
func (i *Instance) Do(args ...string) (any, error) { return Do(i.Addr, args...) }

// Kill ends the server with SIGKILL, as a crash or a lost host would, and
// waits for the process to go. Clients see their connections reset and new
// ones refused. Kill does nothing if the server is not running.
func (i *Instance) Kill() { i.halt(syscall.SIGKILL) }

// Stop shuts the server down with SIGTERM (SIGKILL after 5 s) and waits for
// the process to go. Stop does nothing if the server is not running; the
// test's cleanup calls it.
func (i *Instance) Stop() { i.halt(syscall.SIGTERM) }

func (i *Instance) halt(sig syscall.Signal) {
	i.mu.Lock()
	p := i.proc
	i.proc = nil
	i.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Restart stops the server if it is running (with SIGKILL) and starts a new,
// empty one on the same port and with the same arguments. A cluster node
// comes back as a new node that belongs to no cluster.
func (i *Instance) Restart() {
	i.tb.Helper()
	i.Kill()
	entries, err := os.ReadDir(i.dir)
	if err != nil {
		i.tb.Fatalf("redistest: restart: %v", err)
	}
	for _, e := range entries {
		if e.Name() != logName {
			os.RemoveAll(filepath.Join(i.dir, e.Name()))
		}
	}
	// The port was ours a moment ago; wait out a client of another test that
	// may have grabbed it as an ephemeral port.
	deadline := time.Now().Add(startTimeout)
	for {
		err := i.start()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			i.tb.Fatalf("redistest: restart on port %d: %v\nlog:\n%s", i.Port, err, i.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
