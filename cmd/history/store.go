package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// Dialect names the SQL database behind a Store.
type Dialect string

// The dialects a Store speaks.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Store is the history's database: the snapshots' tables, created and
// migrated by Open. It is safe for concurrent use, and several processes
// may share one database.
type Store struct {
	db      *sql.DB
	dialect Dialect
}

// Open opens the history database named by dsn and brings its schema to
// the current version. A dsn starting with postgres:// or postgresql://
// is PostgreSQL (through pgx; its parameters as pgx takes them); anything
// else is the path of an SQLite file, created with its directory if
// missing (a "sqlite:"
// prefix is allowed). Open fails when the database cannot be reached.
func Open(ctx context.Context, dsn string) (*Store, error) {
	var s *Store
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		db.SetMaxOpenConns(4)
		s = &Store{db: db, dialect: Postgres}
	default:
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return nil, errors.New("history: empty database path")
		}
		// the file is created if missing, and so is its directory: the
		// default path is in a state directory a fresh machine lacks
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		// Immediate transactions take the write lock at BEGIN, so that
		// concurrent writers wait (busy_timeout) instead of failing on
		// a lock upgrade; WAL lets readers go on meanwhile.
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
		db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		db.SetMaxOpenConns(1)
		s = &Store{db: db, dialect: SQLite}
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// Dialect returns the database's dialect.
func (s *Store) Dialect() Dialect { return s.dialect }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// migrations are the schema's versions, in order: migration i brings the
// schema from version i to version i+1. Times are milliseconds since the
// Unix epoch; "at" is the start of a snapshot's minute.
var migrations = []string{
	`CREATE TABLE presence_snapshots (
		at BIGINT PRIMARY KEY,
		taken_at BIGINT NOT NULL,
		instance TEXT NOT NULL
	);
	CREATE TABLE presence_online (
		at BIGINT NOT NULL,
		status TEXT NOT NULL,
		users BIGINT NOT NULL,
		PRIMARY KEY (at, status)
	);
	CREATE TABLE presence_scope_counts (
		at BIGINT NOT NULL,
		class TEXT NOT NULL,
		scope TEXT NOT NULL,
		members BIGINT NOT NULL,
		PRIMARY KEY (at, class, scope)
	);
	CREATE INDEX presence_scope_counts_scope ON presence_scope_counts (class, scope, at);
	CREATE TABLE presence_online_users (
		at BIGINT NOT NULL,
		user_id TEXT NOT NULL,
		status TEXT NOT NULL,
		PRIMARY KEY (at, user_id)
	)`,
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

// migrate applies the missing migrations in one transaction, which holds
// the database's write lock (SQLite: an immediate transaction;
// PostgreSQL: an advisory lock), so that instances starting together
// migrate once.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("history: migrating the schema: %w", err)
	}
	defer tx.Rollback()
	if s.dialect == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7465326881)`); err != nil {
			return fmt.Errorf("history: migrating the schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS presence_history_schema (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("history: migrating the schema: %w", err)
	}
	var version int
	err = tx.QueryRowContext(ctx, `SELECT version FROM presence_history_schema`).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO presence_history_schema (version) VALUES (0)`); err != nil {
			return fmt.Errorf("history: migrating the schema: %w", err)
		}
	case err != nil:
		return fmt.Errorf("history: migrating the schema: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("history: the database's schema is version %d, newer than this program's %d", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		for _, stmt := range strings.Split(migrations[i], ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("history: migration %d: %w", i+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, s.bind(`UPDATE presence_history_schema SET version = ?`), len(migrations)); err != nil {
		return fmt.Errorf("history: migrating the schema: %w", err)
	}
	return tx.Commit()
}

// bind rewrites ? placeholders as $1, $2… for PostgreSQL.
func (s *Store) bind(q string) string {
	if s.dialect != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Write stores snap under its minute (snap.At, which must be truncated to
// the snapshot interval), on behalf of instance. It returns false, and
// writes nothing, when the minute is already stored: the primary key of
// presence_snapshots decides which of several instances writes it.
func (s *Store) Write(ctx context.Context, snap Snapshot, instance string, takenAt time.Time) (bool, error) {
	at := snap.At.UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("history: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.bind(`INSERT INTO presence_snapshots (at, taken_at, instance) VALUES (?, ?, ?) ON CONFLICT (at) DO NOTHING`),
		at, takenAt.UnixMilli(), instance)
	if err != nil {
		return false, fmt.Errorf("history: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("history: %w", err)
	} else if n == 0 {
		return false, nil
	}
	insert := func(q string, args ...any) error {
		if _, err := tx.ExecContext(ctx, s.bind(q), args...); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		return nil
	}
	for _, st := range sortedKeys(snap.Online) {
		if err := insert(`INSERT INTO presence_online (at, status, users) VALUES (?, ?, ?)`, at, st, snap.Online[st]); err != nil {
			return false, err
		}
	}
	for _, sc := range snap.Scopes {
		if err := insert(`INSERT INTO presence_scope_counts (at, class, scope, members) VALUES (?, ?, ?, ?)`, at, sc.Class, sc.Scope, sc.Members); err != nil {
			return false, err
		}
	}
	for _, u := range snap.Users {
		if err := insert(`INSERT INTO presence_online_users (at, user_id, status) VALUES (?, ?, ?)`, at, u.User, u.Status); err != nil {
			return false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("history: %w", err)
	}
	return true, nil
}

// Prune deletes the snapshots of the minutes before before, and returns
// how many snapshots it deleted.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	ms := before.UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	defer tx.Rollback()
	var n int64
	for _, table := range []string{"presence_online", "presence_scope_counts", "presence_online_users", "presence_snapshots"} {
		res, err := tx.ExecContext(ctx, s.bind(`DELETE FROM `+table+` WHERE at < ?`), ms)
		if err != nil {
			return 0, fmt.Errorf("history: pruning %s: %w", table, err)
		}
		if table == "presence_snapshots" {
			n, _ = res.RowsAffected()
		}
	}
	return n, tx.Commit()
}

// OnlinePoint is the online count per status in one step of a range.
type OnlinePoint struct {
	// At is the start of the step.
	At time.Time
	// ByStatus is, per status, the largest count of the step's snapshots.
	ByStatus map[string]int64
	// Total is the largest sum over the statuses of one snapshot of the step.
	Total int64
}

// CountPoint is a scope's member count in one step of a range: the
// largest of the step's snapshots.
type CountPoint struct {
	At      time.Time
	Members int64
}

// Online returns the online counts of the snapshots in [from, to), in
// steps of step (at least the snapshot interval for one point a step),
// each step the largest count of its snapshots. Steps without snapshots
// are left out.
func (s *Store) Online(ctx context.Context, from, to time.Time, step time.Duration) ([]OnlinePoint, error) {
	if step <= 0 {
		return nil, errors.New("history: step must be positive")
	}
	rows, err := s.db.QueryContext(ctx, s.bind(`SELECT at, status, users FROM presence_online WHERE at >= ? AND at < ? ORDER BY at`),
		from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	type acc struct {
		by    map[string]int64
		total map[int64]int64 // snapshot → its sum
	}
	steps := map[int64]*acc{}
	for rows.Next() {
		var at, n int64
		var st string
		if err := rows.Scan(&at, &st, &n); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		k := stepOf(at, from, step)
		a := steps[k]
		if a == nil {
			a = &acc{by: map[string]int64{}, total: map[int64]int64{}}
			steps[k] = a
		}
		a.by[st] = max(a.by[st], n)
		a.total[at] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	out := make([]OnlinePoint, 0, len(steps))
	for k, a := range steps {
		p := OnlinePoint{At: time.UnixMilli(k).UTC(), ByStatus: a.by}
		for _, t := range a.total {
			p.Total = max(p.Total, t)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// ScopeCounts returns a scope's member counts in [from, to), in steps as
// Online does. A scope is in a snapshot only while it is among its
// class's busiest.
func (s *Store) ScopeCounts(ctx context.Context, class, scope string, from, to time.Time, step time.Duration) ([]CountPoint, error) {
	if step <= 0 {
		return nil, errors.New("history: step must be positive")
	}
	rows, err := s.db.QueryContext(ctx, s.bind(`SELECT at, members FROM presence_scope_counts WHERE class = ? AND scope = ? AND at >= ? AND at < ? ORDER BY at`),
		class, scope, from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	var out []CountPoint
	for rows.Next() {
		var at, n int64
		if err := rows.Scan(&at, &n); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		k := time.UnixMilli(stepOf(at, from, step)).UTC()
		if len(out) > 0 && out[len(out)-1].At.Equal(k) {
			out[len(out)-1].Members = max(out[len(out)-1].Members, n)
			continue
		}
		out = append(out, CountPoint{At: k, Members: n})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return out, nil
}

// Counts returns how many rows each table holds: presence_snapshots,
// presence_online, presence_scope_counts and presence_online_users.
func (s *Store) Counts(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, table := range []string{"presence_snapshots", "presence_online", "presence_scope_counts", "presence_online_users"} {
		var n int64
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		out[table] = n
	}
	return out, nil
}

// DB returns the database handle, for queries of one's own.
func (s *Store) DB() *sql.DB { return s.db }

// stepOf returns the start (ms) of the step of at, steps counted from from.
func stepOf(at int64, from time.Time, step time.Duration) int64 {
	f, st := from.UnixMilli(), step.Milliseconds()
	if st <= 0 {
		st = 1
	}
	return f + (at-f)/st*st
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
