package history_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// pgServer is a PostgreSQL server of a test's own, from Debian's package,
// in a temporary directory on a free loopback port (never the machine's
// 5432). It runs as the postgres user (or nobody) when the test runs as
// root, since postgres refuses root.
type pgServer struct {
	bin  string
	dir  string
	port int
	cred *syscall.Credential
	cmd  *exec.Cmd
	exit chan struct{}
}

// startPostgres starts a server, or skips the test where no PostgreSQL is
// installed.
func startPostgres(t testing.TB) *pgServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("no PostgreSQL under /usr/lib/postgresql/*/bin: install Debian's postgresql package to run the PostgreSQL tests")
	}
	sort.Strings(bins)
	p := &pgServer{bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "presence-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		for _, name := range []string{"postgres", "nobody"} {
			if u, err := user.Lookup(name); err == nil {
				uid, _ := strconv.Atoi(u.Uid)
				gid, _ := strconv.Atoi(u.Gid)
				p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
				if err := os.Chown(dir, uid, gid); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		if p.cred == nil {
			t.Skip("running as root without a postgres or nobody user to run PostgreSQL as")
		}
	}
	initdb := exec.Command(filepath.Join(p.bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "presence",
		"--auth=trust", "--no-sync", "-E", "UTF8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p.start(t)
	t.Cleanup(p.stop)
	return p
}

// DSN returns the server's connection string.
func (p *pgServer) DSN() string {
	return fmt.Sprintf("postgres://presence@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", p.port)
}

// start starts the server and waits until it accepts connections.
func (p *pgServer) start(t testing.TB) {
	t.Helper()
	p.cmd = exec.Command(filepath.Join(p.bin, "postgres"), "-D", filepath.Join(p.dir, "data"),
		"-p", strconv.Itoa(p.port), "-k", p.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
		"-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("postgres: %v", err)
	}
	p.exit = make(chan struct{})
	go func(c *exec.Cmd, exit chan struct{}) { c.Wait(); close(exit) }(p.cmd, p.exit)
	db, err := sql.Open("pgx", p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-p.exit:
			t.Fatalf("postgres exited at start-up: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not accept connections within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops the server (fast shutdown) and waits for it to exit.
func (p *pgServer) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exit:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exit
	}
	p.cmd = nil
}
