package core

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/internal/keyspace"
)

// Config configures an Engine or a Model. The zero value of every field
// means its documented default; New validates the rest.
type Config struct {
	// Prefix starts every key and channel name. Default "presence". It may
	// not contain '{' or '}' (they would change the cluster hash tag).
	Prefix string

	// Intervals is the heartbeat interval I of each device kind; a device is
	// alive while its last heartbeat is at most 2·I old. Missing kinds take
	// the defaults: 30 s for web, desktop and other, 60 s for ios and android.
	Intervals map[Kind]time.Duration
	// IdleAfter is how long after the last user activity a foreground device
	// turns AWAY. Default 5 min.
	IdleAfter time.Duration
	// PushWindow is how long a backgrounded device stays [StatusPushOnline]
	// after its last heartbeat. Default 10 min.
	PushWindow time.Duration
	// LeaveDelay is how long a user must stay offline after a disconnect or
	// an expiry before OFFLINE is published. Default 15 s; negative: at once.
	LeaveDelay time.Duration
	// CoalesceWindow merges status changes that follow one another within
	// it. Default 1 s; negative: publish every change at once.
	CoalesceWindow time.Duration
	// KeyGrace is how long session keys outlive the latest window of their
	// devices, so that nothing lingers even if no sweep runs. Default 10 s.
	KeyGrace time.Duration
	// MaxDevices caps the live devices of one user. Default 16.
	MaxDevices int
	// KickFence is how long after a login the tokens it supersedes stay
	// refused: those of the devices it kicks, and every other token of its
	// own device (kicked, or of a session that had already ended), even
	// once later sessions of the device have ended too; a fence in force
	// keeps a later end. An implicit login (a heartbeat under PolicyMulti
	// from a device without a live session) under such a fence makes its
	// token the one in force and extends the fence to KickFence after it;
	// one under no fence sets none, so that the keys of devices that only
	// heartbeat expire soon after their window. So a kicked or stale client
	// that keeps heartbeating cannot come back under PolicyMulti. Default
	// 1 h. (A logged-out token stays refused until its device's window
	// ends: only a heartbeat already in flight can carry it.)
	KickFence time.Duration
	// MaxSkew is how far a client timestamp may be from the engine's clock.
	// Default 5 min.
	MaxSkew time.Duration
	// Policy is the login policy of heartbeats: under PolicyMulti a
	// heartbeat from a device without a session logs it in; under the
	// exclusive policies it is refused with ErrNoSession. Login may name
	// another policy for one login. Default PolicyMulti.
	Policy Policy

	// UserBuckets is the number of user buckets: each bucket's keys share a
	// cluster slot, and the sweeper visits each bucket. A batch of
	// heartbeats (HeartbeatBatch, or the concurrent Heartbeat calls group
	// commit merges) is one script call per bucket it spans, so on a
	// single node, where nothing needs spreading, 1 makes each batch one
	// call. The keys depend on it: choose it before going live. Default 16.
	UserBuckets int
	// ScopeBuckets is the number of scope buckets, likewise. Default 16.
	ScopeBuckets int
	// Classes configures scope classes by name (lower-case letters, digits,
	// '-' and '_', at most 32 bytes). Default: "room" (exact, window 2×30 s,
	// sweep every 5 s) and "video" (compact, window 10 min, sweep every 60 s).
	Classes map[string]ScopeClass

	// SweepBatch is the most users (or scopes) one sweep script call
	// settles; a user step also stops early after about 0.3 ms of server
	// time. Default 64.
	SweepBatch int
	// SweepBudget is about the most scope entries one sweep script call
	// examines: about 0.5 ms of server time at the default 256.
	SweepBudget int
	// ReleaseAfter is how many sweeps in a row a scope must be found empty
	// before its keys are deleted. Default 3.
	ReleaseAfter int
	// CountTTL is the lifetime of a count key written by a sweep. Default 10 min.
	CountTTL time.Duration
	// LockLease is the lifetime of a sweep lock. Default 30 s.
	LockLease time.Duration
	// LastGoodCounts is how many scope counts the engine remembers to serve,
	// marked stale, while Redis is unreachable. Default 10,000; negative: none.
	LastGoodCounts int

	// GroupCommit is how many round trips an Engine's group commit keeps
	// on the wire at once (docs/design.md §2): a call (Heartbeat, Status,
	// Login, Logout, Disconnect, SetManual, Touch, Leave) that finds them
	// all out waits, and the calls that waited leave together when one
	// returns, heartbeats and statuses merged into one script call per user
	// bucket, the rest in the same pipeline. A call on an idle engine leaves
	// at once, alone. Default 2, at most 64; -1: off, every call leaves alone
	// (hosts that drive plans themselves, such as the WebAssembly module,
	// never combine).
	GroupCommit int

	// ChangeLog keeps about this many of the latest published changes in a
	// Redis stream, so that a reader that reconnects can catch up from the
	// last entry it saw (ChangeLogAfter). Default 0: no log.
	ChangeLog int

	// Clock supplies "now": a function such as time.Now, a virtual clock's
	// Now for tests and simulations, or adapters/serverclock's Now, which
	// follows the server. Default nil: the Redis server's clock, read by
	// each script, so that skewed hosts cannot move anyone on- or offline.
	Clock func() time.Time
	// Rand supplies session tokens and sweep lock tokens. Default crypto/rand.
	Rand io.Reader
	// Metrics receives counters. Default none.
	Metrics Metrics
	// Logger receives warnings (a failed publish, a lock held elsewhere).
	// Default none. Its type is *slog.Logger; in the WebAssembly builds
	// (GOARCH=wasm) it is an interface of the one method the engine calls,
	// which a *slog.Logger has, so that log/slog is not linked into a
	// module that does not use it (leave it nil, not a nil *slog.Logger,
	// for none there).
	Logger logger
}

// ScopeClass configures one class of scopes.
type ScopeClass struct {
	// Layout is how members are counted. Default LayoutExact.
	Layout Layout
	// Window is how long a touch keeps a member in the scope. Default: the
	// liveness window of a web device (2 × its interval). A compact class's
	// window is at most 7 days.
	Window time.Duration
	// Shards is the number of shards of a scope of a Spread compact class;
	// choose it so that each holds at most 512 members (Redis keeps such
	// hashes compact). Default 256. A compact class that does not spread
	// ignores it: its scopes size themselves (ShardSize). Counts do not
	// depend on it.
	Shards int
	// ShardSize is the average number of members a shard of a compact
	// class that does not spread holds before its scope splits a shard
	// (linear hashing; a sweep merges shards back once the average falls
	// under a quarter of it), so that every shard stays in Redis's compact
	// listpack encoding (at most 512 entries by default) at any size.
	// Default 128, 1 to 200 (a shard not yet split holds about twice the
	// average: 200 keeps it under 512). Counts do not depend on it. A
	// sweep reads whole every shard holding an expired member, so when
	// few members expire at a time, smaller shards mean less to read, at
	// the memory of a key each: a trade of sweep CPU for memory, measured
	// in docs/performance.md ("Sweeps").
	ShardSize int
	// Spread puts each compact shard in its own cluster slot, so that the
	// writes of a very hot scope spread over the masters; counts are the
	// same, and a sweep or count reads all shards in one pipelined round per
	// node. Default false: a scope's shards share one slot, and one script
	// counts them. Only for LayoutCompact.
	Spread bool
	// SweepInterval is how often a scope of the class is swept. Default 5 s.
	SweepInterval time.Duration
	// Bucket is the time span of one approx HyperLogLog. Default Window/10;
	// a window may span at most 1,000 buckets.
	Bucket time.Duration
}

// Limits of inputs (docs/design.md §3) that callers size their calls by.
// The caps on IDs (1 to 128 bytes: CheckID) and on a device's metadata
// (16 entries, 1,024 bytes) are in docs/design.md §3 and in the
// *InputError that refuses what exceeds them.
const (
	MaxBatch         = 1000 // users of Statuses, beats of HeartbeatBatch, touches of TouchBatch
	MaxPage          = 1000 // members of one page, entries of one ChangeLogAfter
	maxClassNameByte = 32
	// maxBucketsPerWindow bounds an approx window: each count reads every
	// bucket of the window in one script call.
	maxBucketsPerWindow = 1000
	// compactLife is what a self-sized compact scope's keys live beyond its
	// window and KeyGrace after their last touch: the sweep visits each
	// shard through the due index at the latest a sweep interval after a
	// window passes, long before, so the keys expire by themselves only in
	// a deployment without a sweeper (memory stays bounded), and the
	// meta's member total stays the shards' sum.
	compactLife = 24 * time.Hour
	// maxCompactWindow bounds a compact window: shards store touch instants
	// modulo 2^31 ms (userlib.lua's stamp), whose ages stay exact below 12.4 days.
	maxCompactWindow = 7 * 24 * time.Hour
)

// validClassName reports whether name is 1 to 32 of a-z, 0-9, '-' and '_'
// (no ':', which separates class and ID inside keys).
func validClassName(name string) bool {
	if name == "" || len(name) > maxClassNameByte {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// settings is a validated Config with every default applied and every
// duration in milliseconds.
type settings struct {
	cfg                                Config
	keys                               keyLayout
	interval                           [len(kindNames)]int64
	idle, push, leave, coalesce, grace int64
	skew, countTTL, lease              int64
	fence                              int64
	keep                               int64 // ms a user page lives past its last write (userKeep)
	maxDevices, batch, budget, release int
	lastGood, changeLog                int
	lanes                              int // GroupCommit: 0 is off
	classes                            map[string]classSettings
	classNames                         []string

	// Precomputed script arguments and keys, so that the heartbeat path
	// does not format them on every call.
	userParams   [13]string             // the common user-script arguments after "now"; the bucket's own ("") filled by userArgs
	heal         string                 // ms a bucket heals after a loss (lua/userlib.lua's layout)
	beatParams   [3]string              // the arguments of lua/heartbeat_steady.lua after now and the bucket's page prefix
	left         [2][2]string           // its ARG_LEFT before and after the seed (leftArg), by whether the bucket was seen
	leftNone     [2]string              // its ARG_LEFT without a seed, by whether the bucket was seen
	intervalArgs [len(kindNames)]string // interval by kind, as a script argument
	users        []userBucketKeys       // by bucket
}

// userBucketKeys are the keys of one user bucket.
type userBucketKeys struct {
	pagePrefix string   // prefix of the page hashes
	counts     string   // the hash of users by published status
	outbox     string   // the hash of events decided and not yet delivered
	keys       []string // meta, due index, big hash, manual hash, as the user scripts take them
	sweep      []string // the same and the lock, as the sweep takes them
	steady     []string // big hash and meta, as the steady beat takes them
}

type classSettings struct {
	layout                   Layout
	window, interval, bucket int64
	shards                   int
	shardSize                int
	spread                   bool
}

// millis is d in whole milliseconds, the unit of every script argument.
func millis(d time.Duration) int64 { return d.Milliseconds() }

func orDur(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func orInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// DefaultClasses returns the scope classes used when Config.Classes is nil.
func DefaultClasses() map[string]ScopeClass {
	return map[string]ScopeClass{
		"room":  {Layout: LayoutExact},
		"video": {Layout: LayoutCompact, Window: 10 * time.Minute, SweepInterval: time.Minute},
	}
}

func newSettings(cfg Config) (*settings, error) {
	s := &settings{cfg: cfg}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; c == '{' || c == '}' || c < 0x20 || c == 0x7f {
			return nil, invalid("Config.Prefix", "may not contain braces or control characters")
		}
	}
	defaults := [len(kindNames)]time.Duration{30 * time.Second, 30 * time.Second, 30 * time.Second, 60 * time.Second, 60 * time.Second}
	for k, d := range cfg.Intervals {
		if !k.valid() {
			return nil, invalid("Config.Intervals", "unknown kind %d", k)
		}
		if d < time.Millisecond {
			return nil, invalid("Config.Intervals["+k.String()+"]", "must be at least 1ms, got %v", d)
		}
	}
	for k := range s.interval {
		d := defaults[k]
		if v, ok := cfg.Intervals[Kind(k)]; ok {
			d = v
		}
		s.interval[k] = millis(d)
	}
	durations := []struct {
		name string
		v    time.Duration
		def  time.Duration
		neg  bool
		out  *int64
	}{
		{"IdleAfter", cfg.IdleAfter, 5 * time.Minute, false, &s.idle},
		{"PushWindow", cfg.PushWindow, 10 * time.Minute, false, &s.push},
		{"LeaveDelay", cfg.LeaveDelay, 15 * time.Second, true, &s.leave},
		{"CoalesceWindow", cfg.CoalesceWindow, time.Second, true, &s.coalesce},
		{"KeyGrace", cfg.KeyGrace, 10 * time.Second, false, &s.grace},
		{"MaxSkew", cfg.MaxSkew, 5 * time.Minute, false, &s.skew},
		{"KickFence", cfg.KickFence, time.Hour, false, &s.fence},
		{"CountTTL", cfg.CountTTL, 10 * time.Minute, false, &s.countTTL},
		{"LockLease", cfg.LockLease, 30 * time.Second, false, &s.lease},
	}
	for _, d := range durations {
		v := orDur(d.v, d.def)
		switch {
		case v < 0 && d.neg:
			v = 0
		case v < time.Millisecond:
			return nil, invalid("Config."+d.name, "must be at least 1ms, got %v", d.v)
		}
		*d.out = millis(v)
	}
	ints := []struct {
		name     string
		v, def   int
		min, max int
		out      *int
	}{
		{"MaxDevices", cfg.MaxDevices, 16, 1, 1024, &s.maxDevices},
		{"SweepBatch", cfg.SweepBatch, 64, 1, 10000, &s.batch},
		{"SweepBudget", cfg.SweepBudget, 256, 1, 100000, &s.budget},
		{"ReleaseAfter", cfg.ReleaseAfter, 3, 1, 1000, &s.release},
		{"LastGoodCounts", cfg.LastGoodCounts, 10000, -1, 10000000, &s.lastGood},
		{"ChangeLog", cfg.ChangeLog, 0, 0, 100000000, &s.changeLog},
		{"GroupCommit", cfg.GroupCommit, 2, -1, 64, &s.lanes},
	}
	for _, n := range ints {
		v := orInt(n.v, n.def)
		if v < n.min || v > n.max {
			return nil, invalid("Config."+n.name, "must be in [%d, %d], got %d", n.min, n.max, n.v)
		}
		*n.out = v
	}
	if s.lastGood < 0 {
		s.lastGood = 0
	}
	if s.lanes < 0 {
		s.lanes = 0
	}
	if !cfg.Policy.valid() {
		return nil, invalid("Config.Policy", "unknown policy %d", cfg.Policy)
	}
	ub, sb := orInt(cfg.UserBuckets, keyspace.DefaultBuckets), orInt(cfg.ScopeBuckets, keyspace.DefaultBuckets)
	if ub < 1 || ub > 16384 {
		return nil, invalid("Config.UserBuckets", "must be in [1, 16384], got %d", cfg.UserBuckets)
	}
	if sb < 1 || sb > 16384 {
		return nil, invalid("Config.ScopeBuckets", "must be in [1, 16384], got %d", cfg.ScopeBuckets)
	}
	s.keys = keyLayout{prefix: prefix, userBuckets: uint32(ub), scopeBuckets: uint32(sb)}
	classes := cfg.Classes
	if classes == nil {
		classes = DefaultClasses()
	}
	s.classes = make(map[string]classSettings, len(classes))
	for name, c := range classes {
		field := "Config.Classes[" + name + "]"
		if !validClassName(name) {
			return nil, invalid("Config.Classes", "class name %q must be 1-32 of a-z, 0-9, '-', '_'", name)
		}
		if !c.Layout.valid() {
			return nil, invalid(field+".Layout", "unknown layout %d", c.Layout)
		}
		if c.Spread && c.Layout != LayoutCompact {
			return nil, invalid(field+".Spread", "only compact scopes have shards to spread")
		}
		cs := classSettings{layout: c.Layout, spread: c.Spread}
		cs.window = millis(orDur(c.Window, time.Duration(2*s.interval[KindWeb])*time.Millisecond))
		cs.interval = millis(orDur(c.SweepInterval, 5*time.Second))
		cs.bucket = 1
		if c.Layout == LayoutApprox {
			cs.bucket = millis(orDur(c.Bucket, time.Duration(max(cs.window/10, 1))*time.Millisecond))
		}
		cs.shards = orInt(c.Shards, 256)
		cs.shardSize = orInt(c.ShardSize, 128)
		if cs.window < 1 || cs.interval < 1 || cs.bucket < 1 {
			return nil, invalid(field, "Window, SweepInterval and Bucket must be at least 1ms")
		}
		if c.Layout == LayoutCompact && cs.window > millis(maxCompactWindow) {
			return nil, invalid(field+".Window", "a compact window is at most %v, got %v", maxCompactWindow, time.Duration(cs.window)*time.Millisecond)
		}
		if c.Layout == LayoutApprox && cs.window/cs.bucket > maxBucketsPerWindow {
			return nil, invalid(field+".Bucket", "a window of %d buckets is more than the %d one count reads at once", cs.window/cs.bucket, maxBucketsPerWindow)
		}
		if cs.shards < 1 || cs.shards > 65536 {
			return nil, invalid(field+".Shards", "must be in [1, 65536], got %d", c.Shards)
		}
		if cs.shardSize < 1 || cs.shardSize > 200 {
			return nil, invalid(field+".ShardSize", "must be in [1, 200], got %d", c.ShardSize)
		}
		s.classes[name] = cs
		s.classNames = append(s.classNames, name)
	}
	sortStrings(s.classNames)
	s.precompute()
	return s, nil
}

func (s *settings) precompute() {
	s.keep = s.userKeep()
	s.userParams = [13]string{itoa(s.idle), itoa(s.push), itoa(s.leave), itoa(s.coalesce), itoa(s.keep),
		"", itoa(int64(s.maxDevices)), itoa(s.skew), itoa(int64(s.cfg.Policy)), "", itoa(s.fence), "", "0"}
	s.heal = itoa(s.healWindow())
	s.beatParams = [3]string{itoa(s.push), itoa(s.keep), itoa(s.idle)}
	for k, iv := range s.interval {
		s.intervalArgs[k] = itoa(iv)
	}
	s.users = make([]userBucketKeys, s.keys.userBuckets)
	names := s.keys.space()
	for b := range s.users {
		s.users[b].pagePrefix = names.PagePrefix(b)
		s.users[b].counts = names.Counts(b)
		s.users[b].outbox = names.Outbox(b)
		s.users[b].sweep = []string{names.Meta(b), names.Due(b), names.Big(b), names.Manual(b), names.Lock(b)}
		s.users[b].keys = s.users[b].sweep[:4:4]
		s.users[b].steady = []string{names.Big(b), names.Meta(b)}
	}
	// lua/heartbeat_steady.lua's LEFT_ fields: those before the seed, and
	// those after it
	head := []string{itoa(s.skew), itoa(s.leave), itoa(s.coalesce), itoa(int64(s.maxDevices)),
		itoa(int64(s.cfg.Policy)), itoa(s.fence), strconv.Itoa(leftChunk)}
	tail := unitSep + strings.Join(append([]string{sufPage, sufCounts, sufOutbox, sufDue, sufManual}, s.intervalArgs[:]...), unitSep)
	for seen, heal := range [2]string{"0", s.heal} {
		s.left[seen] = [2]string{strings.Join(append(head, heal), unitSep) + unitSep, tail}
		s.leftNone[seen] = s.left[seen][0] + s.left[seen][1]
	}
}

// appendCommon appends the common arguments of the user scripts of bucket
// b after now (lua/userlib.lua's ARG_IDLE to ARG_HEAL, with ARG_HEAL for a
// bucket not seen: the planner's userArgs sets it) to args.
func (s *settings) appendCommon(args []string, b uint32) []string {
	n := len(args)
	args = append(args, s.userParams[:]...)
	args[n+5], args[n+9], args[n+11] = s.users[b].pagePrefix, s.users[b].counts, s.users[b].outbox
	return args
}

// healWindow is how long a user bucket heals after a loss of its data
// (docs/design.md §11): the longest window of a beating device, within
// which every live device beats again and its caller hears that it must
// set its manual status again.
func (s *settings) healWindow() int64 {
	window := int64(0)
	for _, iv := range s.interval {
		window = max(window, 2*iv)
	}
	return window
}

// userKeep is how long a user page outlives its last write: a day, or
// past the latest instant anything written then can matter (a window, a
// fence, a pending change) plus KeyGrace when that is later. So a
// deployment that stops leaves no user record behind for longer, sweeper
// or not (docs/design.md §5), while one that runs without a sweeper for a
// while keeps its published statuses, which the counts follow.
// A steady beat moves a page's expiry only once in each half of it
// (lua/heartbeat_steady.lua), so half of it is at least every window plus
// KeyGrace: a page where a device beats never expires.
func (s *settings) userKeep() int64 {
	window := s.push
	for _, iv := range s.interval {
		window = max(window, 2*iv)
	}
	keep := max(s.fence, s.leave, s.coalesce, 2*window+s.grace, 24*time.Hour.Milliseconds()-s.grace)
	return keep + s.grace
}

func (k Kind) valid() bool   { return int(k) < len(kindNames) }
func (p Policy) valid() bool { return int(p) < len(policyNames) }
func (l Layout) valid() bool { return int(l) < len(layoutNames) }
func (m Manual) valid() bool { return int(m) < len(manualNames) }
