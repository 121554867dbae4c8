package redistest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestServer(t *testing.T) {
	srv := Server(t, "--maxmemory", "10mb")
	if srv.Port == 6379 || !strings.HasPrefix(srv.Addr, "127.0.0.1:") {
		t.Fatalf("bad address %q", srv.Addr)
	}
	if got, err := srv.Do("CONFIG", "GET", "maxmemory"); err != nil || len(got.([]any)) != 2 || got.([]any)[1] != "10485760" {
		t.Fatalf("extra args not applied: %v %v", got, err)
	}
	if got, err := srv.Do("CONFIG", "GET", "save"); err != nil || got.([]any)[1] != "" {
		t.Fatalf("save not disabled: %v %v", got, err)
	}
	if _, err := srv.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if got, err := srv.Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET = %v, %v", got, err)
	}
	if _, err := srv.Do("NOSUCHCOMMAND"); !isReplyError(err) {
		t.Fatalf("want an error reply, got %v", err)
	}

	pid := srv.Pid()
	srv.Kill()
	if srv.Pid() != 0 {
		t.Fatal("Pid after Kill should be 0")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still alive after Kill", pid)
	}
	if _, err := srv.Do("PING"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("want connection refused after Kill, got %v", err)
	}

	srv.Restart()
	if got, err := srv.Do("GET", "k"); err != nil || got != nil {
		t.Fatalf("restarted server should be empty, GET = %v, %v", got, err)
	}
	srv.Stop()
	srv.Stop() // idempotent
	if !strings.Contains(srv.Log(), "redistest: starting on port") {
		t.Fatalf("log lacks start marker:\n%s", srv.Log())
	}
}

func isReplyError(err error) bool {
	var re Error
	return errors.As(err, &re)
}

func TestClusterWithReplicas(t *testing.T) {
	c := ClusterWithReplicas(t, 3, 1)
	if got := len(c.Addrs()); got != 6 {
		t.Fatalf("Addrs: %d nodes, want 6", got)
	}
	if len(c.Masters()) != 3 || len(c.Replicas()) != 3 {
		t.Fatalf("masters %d, replicas %d", len(c.Masters()), len(c.Replicas()))
	}
	for _, key := range []string{"a", "{user1}:x", "{user2}:y", "zzz"} {
		node, err := c.MasterFor(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := node.Do("SET", key, "v"); err != nil {
			t.Fatalf("SET %s on its master %s: %v", key, node.Addr, err)
		}
		// Every other master redirects.
		for _, other := range c.Masters() {
			if other == node {
				continue
			}
			if _, err := other.Do("GET", key); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
				t.Fatalf("GET %s on %s: want MOVED, got %v", key, other.Addr, err)
			}
		}
	}
}

func TestDo(t *testing.T) {
	srv := Server(t)
	got, err := srv.Do("EVAL", "return {1, 'a', false, {2}}", "0")
	if err != nil {
		t.Fatal(err)
	}
	items := got.([]any)
	if len(items) != 4 || items[0] != int64(1) || items[1] != "a" || items[2] != nil || items[3].([]any)[0] != int64(2) {
		t.Fatalf("EVAL = %#v", got)
	}
}

func TestStartReportsPortInUse(t *testing.T) {
	srv := Server(t)
	// A second server on the same port must fail with errPortInUse, the
	// error launch retries on.
	other := &Instance{Addr: srv.Addr, Port: srv.Port, tb: t, bin: srv.bin, dir: t.TempDir()}
	if err := other.start(); !errors.Is(err, errPortInUse) {
		t.Fatalf("start on a taken port: %v, want errPortInUse", err)
	}
	if _, err := srv.Do("PING"); err != nil {
		t.Fatalf("the first server suffered: %v", err)
	}
}

func TestFreePort(t *testing.T) {
	for range 20 {
		for _, cluster := range []bool{false, true} {
			port, err := freePort(cluster)
			if err != nil {
				t.Fatal(err)
			}
			if port == 6379 || port == 16379 || (cluster && port+10000 > 65535) {
				t.Fatalf("freePort(%v) = %d", cluster, port)
			}
		}
	}
}

func TestBinDirMissing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(binEnv, dir)
	_, err := binPath("redis-server")
	if err == nil {
		t.Fatal("binPath found redis-server in an empty directory")
	}
	want := binEnv + "=" + dir + " has no executable " + filepath.Join(dir, "redis-server")
	if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
		t.Fatalf("binPath error %q, want one line containing %q", msg, want)
	}

	t.Setenv(binEnv, "shared/redis-servers/x/bin")
	if _, err := binPath("redis-server"); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Fatalf("relative %s: %v", binEnv, err)
	}
}

// TestBinDir checks that the servers come from the directory PRESENCE_REDIS_BIN
// names: the lane's own where it is set, else a directory of links to PATH's
// binaries.
func TestBinDir(t *testing.T) {
	dir := os.Getenv(binEnv)
	if dir == "" {
		dir = t.TempDir()
		for _, name := range []string{"redis-server", "redis-cli"} {
			p, err := exec.LookPath(name)
			if err != nil {
				t.Skipf("%s not installed; skipping real-server test", name)
			}
			if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv(binEnv, dir)
	}
	out, err := exec.Command(filepath.Join(dir, "redis-server"), "--version").Output()
	if err != nil {
		t.Fatalf("redis-server --version: %v", err)
	}
	// "Redis server v=7.4.1 sha=…" or "Valkey server v=8.0.1 sha=…".
	fields := strings.Fields(string(out))
	if len(fields) < 3 || !strings.HasPrefix(fields[2], "v=") {
		t.Fatalf("redis-server --version: unexpected %q", out)
	}
	wantName, wantVersion := strings.ToLower(fields[0]), strings.TrimPrefix(fields[2], "v=")

	srv := Server(t)
	reply, err := srv.Do("INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	info := reply.(string)
	name, version := "redis", infoField(info, "redis_version")
	if n := infoField(info, "server_name"); n != "" {
		name, version = n, infoField(info, n+"_version")
	}
	if name != wantName || version != wantVersion {
		t.Fatalf("server reports %s %s, the binary in %s is %s %s", name, version, dir, wantName, wantVersion)
	}
	if exe := infoField(info, "executable"); filepath.Dir(exe) != filepath.Clean(dir) {
		t.Fatalf("server runs %s, not a binary in %s", exe, dir)
	}
}

func TestOnlineReplicas(t *testing.T) {
	for _, tc := range []struct {
		name, info string
		want       int
	}{
		{"none", "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n", 0},
		{"one syncing", "role:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=20001,state=wait_bgsave,offset=0,lag=0\r\n", 0},
		{"one online", "role:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=20001,state=online,offset=14,lag=0\r\n", 1},
		{"two, one online", "role:master\r\nslave0:ip=127.0.0.1,port=20001,state=online,offset=14,lag=1\r\nslave1:ip=127.0.0.1,port=20002,state=send_bulk,offset=0,lag=0\r\n", 1},
	} {
		if got := onlineReplicas(tc.info); got != tc.want {
			t.Errorf("%s: onlineReplicas = %d, want %d", tc.name, got, tc.want)
		}
	}
}
