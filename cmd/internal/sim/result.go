package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/cmd/internal/shown"
)

// ErrDisagreement is matched by every *DisagreementError.
var ErrDisagreement = errors.New("sim: the engine disagreed with the truth")

// DisagreementError reports a run in which the engine disagreed with the
// truth beyond what the design allows. It matches ErrDisagreement.
type DisagreementError struct {
	Count    int      // disagreements found
	Examples []string // the first of them
}

// Error summarises the disagreements.
func (e *DisagreementError) Error() string {
	return fmt.Sprintf("sim: %d disagreements between the engine and the truth, first: %s", e.Count, strings.Join(e.Examples[:min(3, len(e.Examples))], "; "))
}

// Is matches ErrDisagreement.
func (e *DisagreementError) Is(target error) bool { return target == ErrDisagreement }

// Result is the outcome of a run.
type Result struct {
	Config     Config
	Stats      Stats
	Rows       []Row
	Violations []string // the first disagreements, described
	Wall       time.Duration
	// CrashAt and RestartAt are when an edge crashed and came back
	// (virtual time since the start; zero: no crash).
	CrashAt, RestartAt time.Duration
}

func (w *world) result() *Result {
	r := &Result{Config: w.cfg, Stats: w.stats, Rows: w.rows, Violations: w.violations, Wall: time.Since(w.wallStart)}
	if w.crashTick > 0 {
		r.CrashAt = time.Duration(int64(w.crashTick)*w.tickMS) * time.Millisecond
		r.RestartAt = time.Duration(int64(w.restartTick)*w.tickMS) * time.Millisecond
	}
	return r
}

// Err returns a *DisagreementError if the engine ever disagreed with the
// truth beyond what the design allows, else nil.
func (r *Result) Err() error {
	if r.Stats.Violations == 0 {
		return nil
	}
	return &DisagreementError{Count: r.Stats.Violations, Examples: r.Violations}
}

// statusCols are the statuses a run reports, in the order they are shown.
var statusCols = shown.Statuses()

// WriteCSV writes the time series, one row per sweep.
func (r *Result) WriteCSV(out io.Writer) error {
	cw := csv.NewWriter(out)
	head := []string{"t_s", "wall_s"}
	for _, s := range statusCols {
		head = append(head, "truth_"+s.String(), "engine_"+s.String())
	}
	head = append(head, "pending", "unsettled", "viewers_truth", "viewers_engine", "count_mismatch", "max_count_age_s",
		"events", "truth_changes", "beats", "refused", "refused_expected", "kicks", "kicks_expected", "redis_trips", "script_calls")
	if err := cw.Write(head); err != nil {
		return err
	}
	itoa := strconv.Itoa
	formatInt64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	seconds := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	for _, row := range r.Rows {
		rec := []string{seconds(row.Elapsed), seconds(row.Wall)}
		for _, s := range statusCols {
			rec = append(rec, formatInt64(row.Truth[s]), formatInt64(row.Engine[s]))
		}
		rec = append(rec, itoa(row.Pending), itoa(row.Unsettled), formatInt64(row.ViewersTruth), formatInt64(row.ViewersEngine), itoa(row.CountMismatch),
			seconds(row.MaxStaleness), itoa(row.Events), itoa(row.TruthChanges), itoa(row.Beats), itoa(row.Refused), itoa(row.RefusedExpected),
			itoa(row.Kicks), itoa(row.KicksExpected), formatInt64(row.RedisTrips), formatInt64(row.ScriptCalls))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteFiles writes series.csv and chart.svg into dir (created if need
// be) and returns their paths.
func (r *Result) WriteFiles(dir string) (csvPath, svgPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	csvPath, svgPath = filepath.Join(dir, "series.csv"), filepath.Join(dir, "chart.svg")
	for _, f := range []struct {
		path  string
		write func(io.Writer) error
	}{{csvPath, r.WriteCSV}, {svgPath, r.WriteSVG}} {
		out, err := os.Create(f.path)
		if err != nil {
			return "", "", err
		}
		if err := f.write(out); err != nil {
			out.Close()
			return "", "", err
		}
		if err := out.Close(); err != nil {
			return "", "", err
		}
	}
	return csvPath, svgPath, nil
}

// Agreement summarises how the engine compared with the truth.
type Agreement struct {
	Rows            int     // comparisons at sweeps
	StatusSamples   int     // user statuses compared exactly (census)
	StatusMismatch  int     // of which disagreed
	MeanPending     float64 // users per sweep whose published status lagged a recent change (allowed)
	MaxPending      int
	Unsettled       int // published statuses still wrong past the debounce (violations)
	CountChecks     int // video counts compared
	CountMismatch   int // of which disagreed or were too old
	MaxCountAge     time.Duration
	MeanViewerError float64 // mean |engine − truth now| of the summed viewer counts (staleness allowed by design)
}

// Agreement computes the agreement figures of the run.
func (r *Result) Agreement() Agreement {
	a := Agreement{Rows: len(r.Rows), StatusSamples: r.Stats.Census, StatusMismatch: r.Stats.CensusMismatch,
		CountChecks: r.Stats.CountChecks, CountMismatch: r.Stats.CountMismatch}
	var pendingSum, viewerErrorSum float64
	for _, row := range r.Rows {
		pendingSum += float64(row.Pending)
		a.MaxPending = max(a.MaxPending, row.Pending)
		a.Unsettled += row.Unsettled
		a.MaxCountAge = max(a.MaxCountAge, row.MaxStaleness)
		d := row.ViewersEngine - row.ViewersTruth
		if d < 0 {
			d = -d
		}
		viewerErrorSum += float64(d)
	}
	if len(r.Rows) > 0 {
		a.MeanPending = pendingSum / float64(len(r.Rows))
		a.MeanViewerError = viewerErrorSum / float64(len(r.Rows))
	}
	return a
}

// Summary renders the run's figures for people.
func (r *Result) Summary() string {
	var b strings.Builder
	cfg, stats, agreement := r.Config, r.Stats, r.Agreement()
	fmt.Fprintf(&b, "simulated %v of %d users on %d edges (%s engine), seed %d, in %.1fs of wall time\n",
		cfg.Duration, cfg.Users, cfg.Edges, cfg.Engine, cfg.Seed, r.Wall.Seconds())
	fmt.Fprintf(&b, "  heartbeats %d in %d batches (%d lost on the way), logins %d, kicks %d (truth %d), network switches %d, sessions vanished %d\n",
		stats.Beats, stats.Batches, stats.Lost, stats.Logins, stats.Kicks, stats.KicksExpected, stats.Switches, stats.Vanished)
	fmt.Fprintf(&b, "  refused heartbeats %d (truth %d; %d from kicked clients), manual changes %d, edge crashes %d (%d devices moved)\n",
		stats.Refused, stats.RefusedExpected, stats.StaleSent, stats.Manual, stats.Crashes, stats.Moved)
	fmt.Fprintf(&b, "  video touches %d, leaves %d, viewings %d\n", stats.Touches, stats.Leaves, stats.Watches)
	fmt.Fprintf(&b, "  events published %d for %d net changes of the truth (%.1f%% suppressed by debounce)\n",
		stats.Events, stats.TruthChanges, 100*(1-float64(stats.Events)/atLeastOne(float64(stats.TruthChanges))))
	if n := len(r.Rows); n > 0 {
		last := r.Rows[n-1]
		fmt.Fprintf(&b, "  redis: %d round trips, %d script calls (%.0f calls per virtual second)\n",
			last.RedisTrips, last.ScriptCalls, float64(last.ScriptCalls)/cfg.Duration.Seconds())
		fmt.Fprintf(&b, "  at the end: truth")
		for _, st := range statusCols {
			fmt.Fprintf(&b, " %s=%d", st, last.Truth[st])
		}
		fmt.Fprintf(&b, "; engine (published)")
		for _, st := range statusCols {
			fmt.Fprintf(&b, " %s=%d", st, last.Engine[st])
		}
		fmt.Fprintf(&b, "; viewers truth=%d engine=%d\n", last.ViewersTruth, last.ViewersEngine)
	}
	fmt.Fprintf(&b, "agreement over %d sweeps: statuses %d/%d exact; published status lagging (allowed, within %v): mean %.1f, max %d users; unsettled %d\n",
		agreement.Rows, agreement.StatusSamples-agreement.StatusMismatch, agreement.StatusSamples, settleAllowance(cfg), agreement.MeanPending, agreement.MaxPending, agreement.Unsettled)
	fmt.Fprintf(&b, "  video counts %d/%d right as of their instant, oldest %v (allowed %v); mean |engine−truth now| of all viewers %.1f\n",
		agreement.CountChecks-agreement.CountMismatch, agreement.CountChecks, agreement.MaxCountAge, videoSweep+cfg.SweepEvery+cfg.Tick, agreement.MeanViewerError)
	if stats.Violations == 0 {
		fmt.Fprintf(&b, "no disagreement beyond what the design allows\n")
	} else {
		fmt.Fprintf(&b, "%d DISAGREEMENTS beyond what the design allows; first:\n", stats.Violations)
		for _, v := range r.Violations[:min(10, len(r.Violations))] {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	return b.String()
}

func settleAllowance(c Config) time.Duration {
	return 15*time.Second + time.Second + 2*c.SweepEvery + c.Tick
}

func atLeastOne(x float64) float64 { return max(x, 1) }

func sortStrings(s []string) { sort.Strings(s) }
