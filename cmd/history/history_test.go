package history_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/cmd/history"
)

// t0 is the simulated clock's start: the tests never read the real clock.
var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// backend is a database the suite runs on: a DSN per test.
type backend struct {
	name string
	dsn  func(t *testing.T) string
}

func sqliteDSN(t *testing.T) string { return filepath.Join(t.TempDir(), "history.db") }

// fixedSource returns the same figures each time: counts per status, four
// rooms (a: 3 members, b: 2, c: 1, d: 0) and one video scope, two users.
var fixedSource = history.SourceFunc(func(ctx context.Context, users bool) (history.Snapshot, error) {
	s := history.Snapshot{
		Online: map[string]int64{"ONLINE": 5, "AWAY": 2, "DND": 1, "PUSH_ONLINE": 0},
		Scopes: []history.ScopeCount{{Class: "room", Scope: "c", Members: 1}, {Class: "room", Scope: "a", Members: 3},
			{Class: "room", Scope: "b", Members: 2}, {Class: "room", Scope: "d"}, {Class: "video", Scope: "x", Members: 4}},
	}
	if users {
		s.Users = []history.UserStatus{{User: "alice", Status: "ONLINE"}, {User: "bob", Status: "AWAY"}}
	}
	return s, nil
})

func open(t *testing.T, dsn string) *history.Store {
	t.Helper()
	st, err := history.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newSnapshotter(t *testing.T, cfg history.Config) *history.Snapshotter {
	t.Helper()
	if cfg.Source == nil {
		cfg.Source = fixedSource
	}
	s, err := history.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rowsPerSeries returns, per series of each table, how many rows it has.
func rowsPerSeries(t *testing.T, st *history.Store) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, q := range []string{
		`SELECT 'snapshots', COUNT(*) FROM presence_snapshots`,
		`SELECT 'online:' || status, COUNT(*) FROM presence_online GROUP BY status`,
		`SELECT 'scope:' || class || ':' || scope, COUNT(*) FROM presence_scope_counts GROUP BY class, scope`,
		`SELECT 'user:' || user_id || ':' || status, COUNT(*) FROM presence_online_users GROUP BY user_id, status`,
	} {
		rows, err := st.DB().Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			out[k] = n
		}
		rows.Close()
	}
	return out
}

// testThreeSnapshotters runs three snapshotters, each with a database
// handle of its own, on one database for 10 simulated minutes; in each
// minute the three take their snapshot at once, at different seconds.
// Exactly one row per minute and series must be written.
func testThreeSnapshotters(t *testing.T, dsn string) {
	var snaps []*history.Snapshotter
	for i := range 3 {
		snaps = append(snaps, newSnapshotter(t, history.Config{Store: open(t, dsn), TopN: 2, Users: true,
			Instance: fmt.Sprintf("instance-%d", i)}))
	}
	written := 0
	for minute := range 10 {
		var wg sync.WaitGroup
		results := make([]history.Result, 3)
		errs := make([]error, 3)
		for i, s := range snaps {
			now := t0.Add(time.Duration(minute)*time.Minute + time.Duration(i*17)*time.Second)
			wg.Go(func() { results[i], errs[i] = s.Take(context.Background(), now) })
		}
		wg.Wait()
		n := 0
		for i := range 3 {
			if errs[i] != nil {
				t.Fatalf("minute %d, snapshotter %d: %v", minute, i, errs[i])
			}
			if results[i].Written {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("minute %d: %d snapshotters wrote it, want 1", minute, n)
		}
		written += n
	}
	got := rowsPerSeries(t, snaps[0].Store())
	want := map[string]int{"snapshots": 10, "online:ONLINE": 10, "online:AWAY": 10, "online:DND": 10, "online:PUSH_ONLINE": 10,
		"scope:room:a": 10, "scope:room:b": 10, "scope:video:x": 10, "user:alice:ONLINE": 10, "user:bob:AWAY": 10}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows per series:\n got %v\nwant %v", got, want)
	}
	t.Logf("HISTORY 3 snapshotters × 10 simulated minutes: %d snapshots written, rows per series %v", written, got)

	pts, err := snaps[1].Store().Online(context.Background(), t0, t0.Add(10*time.Minute), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].ByStatus["ONLINE"] != 5 || pts[1].Total != 8 || !pts[1].At.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("Online in 5 min steps: %+v", pts)
	}
	cps, err := snaps[2].Store().ScopeCounts(context.Background(), "room", "a", t0, t0.Add(10*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 10 || cps[9].Members != 3 {
		t.Fatalf("room:a by minute: %+v", cps)
	}
}

// testRetention keeps 5 minutes: after 10 simulated minutes, the
// snapshots of minutes 4 to 9 remain.
func testRetention(t *testing.T, dsn string) {
	st := open(t, dsn)
	s := newSnapshotter(t, history.Config{Store: st, Retention: 5 * time.Minute, Users: true})
	var pruned int64
	for minute := range 10 {
		r, err := s.Take(context.Background(), t0.Add(time.Duration(minute)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		pruned += r.Pruned
	}
	got := rowsPerSeries(t, st)
	if got["snapshots"] != 6 || got["online:ONLINE"] != 6 || got["scope:room:a"] != 6 || got["user:alice:ONLINE"] != 6 || pruned != 4 {
		t.Fatalf("after 10 minutes with 5 minutes' retention: %v, pruned %d", got, pruned)
	}
	pts, err := st.Online(context.Background(), t0, t0.Add(time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 6 || !pts[0].At.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("points left: %+v", pts)
	}
	t.Logf("HISTORY retention 5 min over 10 simulated minutes: %d snapshots pruned, %d kept (minutes 4–9)", pruned, got["snapshots"])
}

// fakeClock is Run's clock: each wait Run asks for is sent to the test,
// which advances the time and releases it.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan fakeWait
}

type fakeWait struct {
	d  time.Duration
	ch chan time.Time
}

func newFakeClock(at time.Time) *fakeClock {
	return &fakeClock{now: at, waits: make(chan fakeWait)}
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- fakeWait{d, ch}
	return ch
}

// next waits for Run's next wait, advances the clock by it, calls before
// (if any) and releases it.
func (c *fakeClock) next(t *testing.T, before func()) time.Duration {
	t.Helper()
	select {
	case w := <-c.waits:
		c.mu.Lock()
		c.now = c.now.Add(w.d)
		now := c.now
		c.mu.Unlock()
		if before != nil {
			before()
		}
		w.ch <- now
		return w.d
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not wait within 60 s")
		return 0
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// runWithOutage drives Run on a simulated clock: minute 0 is written;
// then the database goes down (down), and each attempt (1:00, 1:10,
// 1:20) fails, is logged at error level and retried after RetryEvery;
// after three failures the database comes back (up), and the retry at
// 1:30 writes minute 1.
func runWithOutage(t *testing.T, s func(history.Config) *history.Snapshotter, down, up func()) {
	clock := newFakeClock(t0.Add(5 * time.Second))
	var logs syncBuffer
	var mu sync.Mutex
	var results []error
	snap := s(history.Config{Now: clock.Now, After: clock.After, RetryEvery: 10 * time.Second, Timeout: 5 * time.Second,
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		OnResult: func(r history.Result, err error) { mu.Lock(); results = append(results, err); mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- snap.Run(ctx) }()

	if d := clock.next(t, down); d != 55*time.Second { // minute 0 written at 0:05, next at 1:00
		t.Fatalf("after a written snapshot Run waited %v, want 55s", d)
	}
	for i := range 3 {
		var hook func()
		if i == 2 {
			hook = up
		}
		if d := clock.next(t, hook); d != 10*time.Second {
			t.Fatalf("after failure %d Run waited %v, want the retry interval 10s", i+1, d)
		}
	}
	if d := clock.next(t, cancel); d != 30*time.Second { // minute 1 written at 1:30, next at 2:00
		t.Fatalf("after recovering Run waited %v, want 30s", d)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var failed int
	for _, err := range results {
		if err != nil {
			failed++
		}
	}
	if len(results) != 5 || failed != 3 || results[0] != nil || results[4] != nil {
		t.Fatalf("attempts: %v", results)
	}
	out := logs.String()
	if strings.Count(out, "level=ERROR msg=\"presence: online-history snapshot failed; retrying\"") != 3 ||
		!strings.Contains(out, "failures=3") || !strings.Contains(out, "snapshots work again") {
		t.Fatalf("log:\n%s", out)
	}
	got := rowsPerSeries(t, snap.Store())
	if got["snapshots"] != 2 {
		t.Fatalf("rows: %v", got)
	}
	t.Logf("HISTORY outage: 3 failed attempts logged at error level, 10 s apart; minute 1 written on the next retry; rows %v", got)
	t.Logf("HISTORY first failure: %s", firstLine(out, "ERROR"))
}

func firstLine(s, with string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, with) {
			return l
		}
	}
	return ""
}

func TestSQLite(t *testing.T) {
	t.Run("ThreeSnapshotters", func(t *testing.T) { testThreeSnapshotters(t, sqliteDSN(t)) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, sqliteDSN(t)) })
	t.Run("MissingDirectory", func(t *testing.T) {
		// presence serve's default file is in a state directory that a
		// fresh machine lacks
		dsn := filepath.Join(t.TempDir(), "state", "presence", "history.db")
		open(t, dsn).Close()
	})
	t.Run("Reopen", func(t *testing.T) {
		dsn := sqliteDSN(t)
		open(t, dsn).Close()
		st := open(t, dsn) // the schema is there: migrating again changes nothing
		var v int
		if err := st.DB().QueryRow(`SELECT version FROM presence_history_schema`).Scan(&v); err != nil || v != history.SchemaVersion {
			t.Fatalf("schema version %d, %v", v, err)
		}
	})
	t.Run("DatabaseDown", func(t *testing.T) {
		// The database is "down" while another connection holds an
		// exclusive lock on it: every write fails (at the attempt's
		// timeout, or SQLite's busy timeout).
		dsn := sqliteDSN(t)
		lockDB := open(t, dsn).DB()
		conn, err := lockDB.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		runWithOutage(t, func(cfg history.Config) *history.Snapshotter {
			cfg.Store, cfg.Timeout = open(t, dsn), 300*time.Millisecond
			return newSnapshotter(t, cfg)
		}, func() {
			if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
				t.Fatal(err)
			}
		}, func() {
			if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func TestPostgres(t *testing.T) {
	pg := startPostgres(t)
	fresh := func(t *testing.T) string {
		// A database of its own per subtest.
		name := strings.ToLower(strings.NewReplacer("/", "_").Replace(t.Name()))
		db := open(t, pg.DSN()).DB()
		if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
			t.Fatal(err)
		}
		return strings.Replace(pg.DSN(), "/postgres?", "/"+name+"?", 1)
	}
	t.Run("ThreeSnapshotters", func(t *testing.T) { testThreeSnapshotters(t, fresh(t)) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, fresh(t)) })
	t.Run("DatabaseDown", func(t *testing.T) {
		// The server is stopped: connections are refused. The
		// Snapshotter opens the database itself (Config.DSN).
		dsn := fresh(t)
		var snap *history.Snapshotter
		runWithOutage(t, func(cfg history.Config) *history.Snapshotter {
			cfg.DSN, cfg.Timeout = dsn, 10*time.Second
			snap = newSnapshotter(t, cfg)
			return snap
		}, pg.stop, func() { pg.start(t) })
		snap.Close()
	})
}

// TestDatabaseUnreachable: a database that accepts connections and never
// answers. The Snapshotter's attempt ends at its timeout with an error;
// the caller is never held longer. Nothing here needs PostgreSQL.
func TestDatabaseUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	s := newSnapshotter(t, history.Config{DSN: fmt.Sprintf("postgres://x@%s/x?sslmode=disable", ln.Addr()), Timeout: 200 * time.Millisecond})
	_, err = s.Take(context.Background(), t0)
	if err == nil || !strings.Contains(err.Error(), "opening the database") {
		t.Fatalf("Take against a silent database: %v", err)
	}
	if s.Store() != nil {
		t.Fatal("a store though the database never answered")
	}
	t.Logf("HISTORY silent database: %v", err)
}
