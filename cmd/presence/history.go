package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/presencekit/presence/cmd/history"
	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/cmd/internal/shown"
)

// historyStatuses are the table's status columns: every status but
// OFFLINE, those at the screen first.
var historyStatuses = func() []string {
	order := shown.Statuses()
	names := make([]string, len(order))
	for i, s := range order {
		names[i] = s.String()
	}
	return names
}()

// runHistory is "presence history": the online history as a table or CSV,
// from a running service (GET /v1/history) or from the database itself.
func runHistory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCLI("history", "presence history [--url http://host:8080 | --db FILE|DSN] [--since 24h] [--step 1h] [flags]", `
Prints the online history that presence serve records: per step, the
online users by status (the largest count of the step's snapshots), their
total, and with --scope a scope's member count; the step with the most
users is marked peak. Reads GET /v1/history of a running service (--url,
with an admin token in --token or PRESENCE_TOKEN), or the history database
itself (--db: an SQLite file or a postgres:// DSN).`)
	url := fs.String("url", "http://127.0.0.1:8080", "base URL of a running presence serve")
	tok := fs.String("token", "", "admin token for --url (default: $PRESENCE_TOKEN; none with --insecure-dev)")
	db := fs.String("db", "", "read this history database instead of a service: an SQLite file or a postgres:// DSN")
	since := fs.Duration("since", 24*time.Hour, "how far back from now (or from --to)")
	toFlag := fs.String("to", "", "end of the range, RFC 3339 (default: now)")
	step := fs.Duration("step", time.Hour, "step of the table")
	scope := fs.String("scope", "", "also a scope's member count, as class:id (room:lobby)")
	format := fs.String("format", "table", "table or csv")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if *format != "table" && *format != "csv" {
		return usageError{msg: fmt.Sprintf("--format %q: want table or csv", *format)}
	}
	if *since <= 0 || *step <= 0 {
		return usageError{msg: "--since and --step must be positive"}
	}
	to := time.Now()
	if *toFlag != "" {
		t, err := time.Parse(time.RFC3339, *toFlag)
		if err != nil {
			return usageError{msg: fmt.Sprintf("--to %q: want RFC 3339, such as 2026-12-01T12:00:00Z", *toFlag)}
		}
		to = t
	}
	from := to.Add(-*since)
	if *scope != "" {
		if c, id, ok := strings.Cut(*scope, ":"); !ok || c == "" || id == "" {
			return usageError{msg: fmt.Sprintf("--scope %q: want class:id", *scope)}
		}
	}
	var h server.HistoryResponse
	var err error
	if *db != "" {
		h, err = historyFromDB(ctx, *db, from, to, *step, *scope)
	} else {
		if *tok == "" {
			*tok = strings.TrimSpace(os.Getenv("PRESENCE_TOKEN"))
		}
		h, err = historyFromService(ctx, *url, *tok, from, to, *step, *scope)
	}
	if err != nil {
		return err
	}
	return printHistory(stdout, h, *format)
}

// historyFromDB reads the history database as GET /v1/history does.
func historyFromDB(ctx context.Context, dsn string, from, to time.Time, step time.Duration, scope string) (server.HistoryResponse, error) {
	st, err := history.Open(ctx, dsn)
	if err != nil {
		return server.HistoryResponse{}, err
	}
	defer st.Close()
	pts, err := st.Online(ctx, from, to, step)
	if err != nil {
		return server.HistoryResponse{}, err
	}
	h := server.HistoryResponse{From: from.UnixMilli(), To: to.UnixMilli(), StepMS: step.Milliseconds()}
	for _, p := range pts {
		hp := server.HistoryPoint{At: p.At.UnixMilli(), ByStatus: p.ByStatus, Total: p.Total}
		h.Points = append(h.Points, hp)
		if h.Peak == nil || hp.Total > h.Peak.Total {
			h.Peak = &hp
		}
	}
	if scope != "" {
		class, id, _ := strings.Cut(scope, ":")
		cps, err := st.ScopeCounts(ctx, class, id, from, to, step)
		if err != nil {
			return server.HistoryResponse{}, err
		}
		h.Scope = &server.ScopeHistory{Scope: scope}
		for _, c := range cps {
			h.Scope.Points = append(h.Scope.Points, server.CountPoint{At: c.At.UnixMilli(), Count: c.Members})
		}
	}
	return h, nil
}

// historyFromService asks a running service's GET /v1/history.
func historyFromService(ctx context.Context, base, tok string, from, to time.Time, step time.Duration, scope string) (server.HistoryResponse, error) {
	q := neturl.Values{}
	q.Set("from", strconv.FormatInt(from.UnixMilli(), 10))
	q.Set("to", strconv.FormatInt(to.UnixMilli(), 10))
	q.Set("step", strconv.FormatInt(step.Milliseconds(), 10))
	if scope != "" {
		q.Set("scope", scope)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(base, "/")+"/v1/history?"+q.Encode(), nil)
	if err != nil {
		return server.HistoryResponse{}, usageError{msg: fmt.Sprintf("--url %q: %v", base, err)}
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return server.HistoryResponse{}, fmt.Errorf("GET /v1/history: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return server.HistoryResponse{}, fmt.Errorf("GET /v1/history: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error server.Error `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
			return server.HistoryResponse{}, fmt.Errorf("GET /v1/history: %d %s: %s", res.StatusCode, e.Error.Code, e.Error.Message)
		}
		return server.HistoryResponse{}, fmt.Errorf("GET /v1/history: %s", res.Status)
	}
	var h server.HistoryResponse
	if err := json.Unmarshal(body, &h); err != nil {
		return server.HistoryResponse{}, fmt.Errorf("GET /v1/history: %w", err)
	}
	return h, nil
}

// printHistory writes h as an aligned table or as CSV: a row per step,
// times in UTC (RFC 3339).
func printHistory(w io.Writer, h server.HistoryResponse, format string) error {
	header := append([]string{"time"}, historyStatuses...)
	header = append(header, "total")
	counts := map[int64]int64{}
	if h.Scope != nil {
		header = append(header, h.Scope.Scope)
		for _, c := range h.Scope.Points {
			counts[c.At] = c.Count
		}
	}
	header = append(header, "peak")
	var rows [][]string
	for _, p := range h.Points {
		row := []string{time.UnixMilli(p.At).UTC().Format(time.RFC3339)}
		for _, st := range historyStatuses {
			row = append(row, strconv.FormatInt(p.ByStatus[st], 10))
		}
		row = append(row, strconv.FormatInt(p.Total, 10))
		if h.Scope != nil {
			if n, ok := counts[p.At]; ok {
				row = append(row, strconv.FormatInt(n, 10))
			} else {
				row = append(row, "")
			}
		}
		if h.Peak != nil && h.Peak.At == p.At {
			row = append(row, "peak")
		} else {
			row = append(row, "")
		}
		rows = append(rows, row)
	}
	if format == "csv" {
		cw := csv.NewWriter(w)
		_ = cw.Write(header)
		_ = cw.WriteAll(rows)
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if len(rows) == 0 {
		fmt.Fprintln(tw, "(no snapshots in this range)")
	}
	return tw.Flush()
}
