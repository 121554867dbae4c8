// Package history records who was online, minute by minute, in a SQL
// database: the durable record that Redis, which holds presence itself,
// does not keep.
//
// A [Snapshotter] takes a [Snapshot] from a [Source] every minute (by
// default) — the online count per status, the member counts of every
// scope class's busiest scopes, and optionally the list of online users
// with their status — and writes it to a [Store]: SQLite (a pure-Go
// driver, no cgo) by default, PostgreSQL when given a postgres:// DSN. The
// Store creates and migrates its tables itself.
//
// Several instances may snapshot the same database: each snapshot is
// keyed by its minute, and the database's unique key on that minute lets
// one instance's write through and turns the others' into no-ops (no lock
// in memory is involved). Old snapshots are deleted after a retention
// period. A database that is down makes snapshots fail, each failure
// logged and retried, in the Snapshotter's own goroutine: presence itself
// never waits for the database.
//
// [EngineSource] reads a snapshot from a [core.Engine] for any Go service;
// presence serve runs a Snapshotter over its own source (flag
// --history=false turns it off). Store.Online and Store.ScopeCounts read the
// history back, in steps.
//
// The history is a record, not a backup: after a Redis loss presence comes
// back from the clients' heartbeats, not from the snapshots.
package history
