package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/cmd/history"
	"github.com/presencekit/presence/cmd/internal/server"
)

// seedDay writes three simulated hours of snapshots, one a minute, from
// 09:00 UTC: ONLINE 10, 40, 20 in the three hours, AWAY 2, and room:lobby
// with 3 members in the second hour only.
func seedDay(t *testing.T, path string) {
	t.Helper()
	st, err := history.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for m := range 180 {
		at := start.Add(time.Duration(m) * time.Minute)
		snap := history.Snapshot{At: at, Online: map[string]int64{"ONLINE": []int64{10, 40, 20}[m/60], "AWAY": 2, "DND": 0, "PUSH_ONLINE": 0}}
		if m/60 == 1 {
			snap.Scopes = []history.ScopeCount{{Class: "room", Scope: "lobby", Members: 3}}
		}
		if _, err := st.Write(context.Background(), snap, "seed", at); err != nil {
			t.Fatal(err)
		}
	}
}

const wantHistoryTable = `time                  ONLINE  AWAY  DND  PUSH_ONLINE  total  room:lobby  peak
2026-12-01T09:00:00Z  10      2     0    0            12                 
2026-12-01T10:00:00Z  40      2     0    0            42     3           peak
2026-12-01T11:00:00Z  20      2     0    0            22                 
`

const wantHistoryCSV = `time,ONLINE,AWAY,DND,PUSH_ONLINE,total,room:lobby,peak
2026-12-01T09:00:00Z,10,2,0,0,12,,
2026-12-01T10:00:00Z,40,2,0,0,42,3,peak
2026-12-01T11:00:00Z,20,2,0,0,22,,
`

// TestHistoryCommand prints a seeded history from the database and from
// a running service, as a table and as CSV.
func TestHistoryCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	seedDay(t, path)
	args := []string{"--to", "2026-12-01T12:00:00Z", "--since", "3h", "--step", "1h", "--scope", "room:lobby"}
	runIt := func(extra ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(append([]string{"history"}, args...), extra...), &out, &errb); code != 0 {
			t.Fatalf("presence history %v: exit %d: %s", extra, code, errb.String())
		}
		return out.String()
	}
	if got := runIt("--db", path); got != wantHistoryTable {
		t.Fatalf("table from the database:\n%q\nwant\n%q", got, wantHistoryTable)
	}
	if got := runIt("--db", path, "--format", "csv"); got != wantHistoryCSV {
		t.Fatalf("CSV from the database:\n%s\nwant\n%s", got, wantHistoryCSV)
	}

	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rc.Close()
	srv, err := server.New(goredis.New(rc), server.Config{Auth: server.AuthConfig{InsecureDev: true}, History: history.Config{DSN: path}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = srv.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	var got string
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(append([]string{"history"}, args...), "--url", ts.URL, "--format", "csv"), &out, &errb)
		if code == 0 {
			got = out.String()
			break
		}
		if !strings.Contains(errb.String(), "503") || time.Now().After(deadline) {
			t.Fatalf("presence history --url: exit %d: %s", code, errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != wantHistoryCSV {
		t.Fatalf("CSV from the service:\n%s\nwant\n%s", got, wantHistoryCSV)
	}
}
