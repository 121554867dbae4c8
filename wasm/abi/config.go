package abi

import (
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/presencekit/presence/core"
)

// Clock modes of Config.Clock.
const (
	// ClockHost: every operation carries "now", the host's instant in
	// milliseconds (virtual time for tests and simulations).
	ClockHost = "host"
	// ClockServer: the scripts read the Redis server's TIME; "now" is ignored.
	ClockServer = "server"
)

// Config is core.Config on the wire, with what a module needs besides:
// the clock mode, the seed of its token generator, and whether to publish.
// Zero values mean the core's defaults, as in core.Config. Fields travel
// in the order they are declared.
type Config struct {
	Prefix         string              `json:"prefix,omitempty"`
	Intervals      map[string]Duration `json:"intervals_ms,omitempty"` // by kind name
	IdleAfter      Duration            `json:"idle_after_ms,omitempty"`
	PushWindow     Duration            `json:"push_window_ms,omitempty"`
	LeaveDelay     Duration            `json:"leave_delay_ms,omitempty"`
	CoalesceWindow Duration            `json:"coalesce_window_ms,omitempty"`
	KeyGrace       Duration            `json:"key_grace_ms,omitempty"`
	MaxSkew        Duration            `json:"max_skew_ms,omitempty"`
	KickFence      Duration            `json:"kick_fence_ms,omitempty"`
	CountTTL       Duration            `json:"count_ttl_ms,omitempty"`
	LockLease      Duration            `json:"lock_lease_ms,omitempty"`
	MaxDevices     int                 `json:"max_devices,omitempty"`
	UserBuckets    int                 `json:"user_buckets,omitempty"`
	ScopeBuckets   int                 `json:"scope_buckets,omitempty"`
	SweepBatch     int                 `json:"sweep_batch,omitempty"`
	SweepBudget    int                 `json:"sweep_budget,omitempty"`
	ReleaseAfter   int                 `json:"release_after,omitempty"`
	LastGoodCounts int                 `json:"last_good_counts,omitempty"`
	ChangeLog      int                 `json:"change_log,omitempty"`
	Policy         Policy              `json:"policy,omitempty"`
	// Classes absent: the default classes.
	Classes map[string]ScopeClass `json:"classes,omitempty"`

	// Clock is ClockHost (the default) or ClockServer.
	Clock string `json:"clock,omitempty"`
	// Seed, when set, makes the module's session and lock tokens a
	// deterministic stream: SeededRand(Seed). Absent: crypto/rand.
	Seed *string `json:"seed,omitempty"`
	// Publish makes the module publish status changes and kicks through
	// the host's publish function.
	Publish bool `json:"publish,omitempty"`
}

// ScopeClass is core.ScopeClass on the wire.
//
//abi:core
type ScopeClass struct {
	Layout        Layout   `json:"layout"`
	Window        Duration `json:"window_ms,omitempty"`
	Shards        int      `json:"shards,omitempty"`
	ShardSize     int      `json:"shard_size,omitempty"`
	Spread        bool     `json:"spread,omitempty"`
	SweepInterval Duration `json:"sweep_interval_ms,omitempty"`
	Bucket        Duration `json:"bucket_ms,omitempty"`
}

// FromConfig returns the wire form of the settings in c. Clock, Rand,
// Metrics and Logger cannot cross the boundary: the result has the host
// clock mode when c.Clock is set, the server clock mode otherwise, and no
// seed; set Seed and Publish on it as needed.
func FromConfig(c core.Config) Config {
	w := Config{
		Prefix: c.Prefix, IdleAfter: Duration(c.IdleAfter), PushWindow: Duration(c.PushWindow),
		LeaveDelay: Duration(c.LeaveDelay), CoalesceWindow: Duration(c.CoalesceWindow), KeyGrace: Duration(c.KeyGrace),
		MaxDevices: c.MaxDevices, KickFence: Duration(c.KickFence), MaxSkew: Duration(c.MaxSkew), Policy: Policy(c.Policy),
		UserBuckets: c.UserBuckets, ScopeBuckets: c.ScopeBuckets,
		SweepBatch: c.SweepBatch, SweepBudget: c.SweepBudget, ReleaseAfter: c.ReleaseAfter,
		CountTTL: Duration(c.CountTTL), LockLease: Duration(c.LockLease), LastGoodCounts: c.LastGoodCounts,
		ChangeLog: c.ChangeLog, Clock: ClockServer,
	}
	if c.Clock != nil {
		w.Clock = ClockHost
	}
	if c.Intervals != nil {
		w.Intervals = make(map[string]Duration, len(c.Intervals))
		for k, d := range c.Intervals {
			w.Intervals[kindKey(k)] = Duration(d)
		}
	}
	if c.Classes != nil {
		w.Classes = make(map[string]ScopeClass, len(c.Classes))
		for name, sc := range c.Classes {
			w.Classes[name] = FromScopeClass(sc)
		}
	}
	return w
}

// kindKey is a kind as a key of Config.Intervals: its name, or its number.
func kindKey(k core.Kind) string {
	if n := kindName(Kind(k)); n != "" {
		return n
	}
	return strconv.Itoa(int(k))
}

// Core returns the core configuration w stands for, without Clock, Rand,
// Metrics and Logger, which the module supplies. It fails with a
// *DecodeError for an interval of an unknown kind name or a clock mode
// other than ClockHost and ClockServer.
func (w Config) Core() (core.Config, error) {
	c := core.Config{
		Prefix: w.Prefix, IdleAfter: time.Duration(w.IdleAfter), PushWindow: time.Duration(w.PushWindow),
		LeaveDelay: time.Duration(w.LeaveDelay), CoalesceWindow: time.Duration(w.CoalesceWindow),
		KeyGrace: time.Duration(w.KeyGrace), MaxDevices: w.MaxDevices, KickFence: time.Duration(w.KickFence),
		MaxSkew: time.Duration(w.MaxSkew),
		Policy:  core.Policy(w.Policy), UserBuckets: w.UserBuckets, ScopeBuckets: w.ScopeBuckets,
		SweepBatch: w.SweepBatch, SweepBudget: w.SweepBudget,
		ReleaseAfter: w.ReleaseAfter, CountTTL: time.Duration(w.CountTTL), LockLease: time.Duration(w.LockLease),
		LastGoodCounts: w.LastGoodCounts, ChangeLog: w.ChangeLog,
	}
	switch w.Clock {
	case "", ClockHost, ClockServer:
	default:
		return core.Config{}, &DecodeError{What: "request", Field: "args.clock", Reason: "must be \"host\" or \"server\", got " + truncate(w.Clock)}
	}
	if w.Intervals != nil {
		c.Intervals = make(map[core.Kind]time.Duration, len(w.Intervals))
		for name, d := range w.Intervals {
			var k Kind
			r := newReader("value", quoteOrNumber(name))
			if err := k.decodeJSON(r); err != nil || r.end() != nil {
				return core.Config{}, &DecodeError{What: "request", Field: "args.intervals_ms", Reason: "unknown kind " + truncate(name)}
			}
			c.Intervals[core.Kind(k)] = time.Duration(d)
		}
	}
	if w.Classes != nil {
		c.Classes = make(map[string]core.ScopeClass, len(w.Classes))
		for name, sc := range w.Classes {
			c.Classes[name] = sc.Core()
		}
	}
	return c, nil
}

// quoteOrNumber makes a map key parseable by the enum decoders: a
// number stays a number, anything else becomes a JSON string.
func quoteOrNumber(s string) []byte {
	if s != "" && len(s) <= 3 {
		digits := true
		for i := 0; i < len(s); i++ {
			digits = digits && s[i] >= '0' && s[i] <= '9'
		}
		if digits {
			return []byte(s)
		}
	}
	return appendString(nil, s)
}

// SeededRand returns the deterministic token stream of a seed: ChaCha8
// keyed by the SHA-256 of seed. A module configured with Seed uses it as
// core.Config.Rand, so a native engine given SeededRand(seed) issues the
// same tokens for the same operations. It is safe for concurrent use.
func SeededRand(seed string) io.Reader {
	return &lockedRand{c: rand.NewChaCha8(sha256.Sum256([]byte(seed)))}
}

type lockedRand struct {
	mu sync.Mutex
	c  *rand.ChaCha8
}

// Read reads from the stream, one caller at a time.
func (r *lockedRand) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.Read(p)
}
