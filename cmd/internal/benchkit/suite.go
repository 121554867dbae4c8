package benchkit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// Workload groups, as Suite.Only takes them.
const (
	GroupThroughput = "throughput"
	GroupMemory     = "memory"
	GroupSweep      = "sweep"
	GroupCache      = "cache"
	GroupStall      = "stall"
	// GroupCompact runs only the compact scope rows of the memory and
	// sweep groups (issue 23's self-sizing scopes); not part of a default
	// run, which has them already.
	GroupCompact = "compact"
)

// Groups lists every workload group in the order a Suite runs them: memory
// first, on a server that the other groups have not filled yet.
func Groups() []string {
	return []string{GroupMemory, GroupThroughput, GroupSweep, GroupCache, GroupStall}
}

// Suite runs the engine's workloads against one Redis server. The zero
// value of each field means its documented default; Brief shrinks the
// defaults to a few seconds in all, for CI.
type Suite struct {
	// URL is the server, redis://host:port[/db]. Required.
	URL string
	// Adapters are the adapters the throughput workloads run through, from
	// Adapters() and Variants(). Default all of Adapters().
	Adapters []string
	// Only restricts the run to these groups (Groups()). Default all.
	Only []string
	// Concurrency is the number of workers of single-item workloads.
	// Default 16.
	Concurrency int
	// BatchConcurrency is the number of workers of batched workloads (a
	// few gateways, each sending one tick's beats at a time). Default 4.
	BatchConcurrency int
	// Batch is the number of beats or touches of one batched call.
	// Default 1000 (core.MaxBatch).
	Batch int
	// Duration bounds each throughput workload. Default 3 s; brief 300 ms.
	Duration time.Duration
	// Users is the number of users the heartbeat and status workloads
	// cycle through. Default 20,000; brief 2,000.
	Users int
	// MemoryItems is the number of devices, and of members of one scope,
	// whose memory is measured. Default 100,000; brief 10,000.
	MemoryItems int
	// Clock is how the engines of the throughput and cache workloads read
	// "now": ClockServer (default) or ClockScript.
	Clock string
	// Backlogs are the numbers of expired entries swept. Default 50,000
	// and 1,000,000; brief 5,000.
	Backlogs []int
	// StallDevices and StallMembers are the expired devices and scope
	// members swept while another client PINGs (the stall group). Default
	// 200,000 and 1,000,000; brief 5,000 and 10,000.
	StallDevices, StallMembers int
	// ShardSize is the compact class's core.ScopeClass.ShardSize, for
	// weighing memory against sweep reads. Default 0: the engine's.
	ShardSize int
	// Brief shrinks the defaults for a smoke run (CI).
	Brief bool
	// Miniredis says the target is the embedded miniredis: the server-side
	// probes (SLOWLOG, OBJECT ENCODING, memory) are skipped.
	Miniredis bool
	// Log receives progress lines. Default none.
	Log io.Writer
}

// Settings are a Suite's effective settings, as a Report records them.
type Settings struct {
	Adapters         []string      `json:"adapters"`
	Groups           []string      `json:"groups"`
	Concurrency      int           `json:"concurrency"`
	BatchConcurrency int           `json:"batch_concurrency"`
	Batch            int           `json:"batch"`
	Duration         time.Duration `json:"duration_ns"`
	Users            int           `json:"users"`
	MemoryItems      int           `json:"memory_items"`
	Backlogs         []int         `json:"backlogs"`
	StallDevices     int           `json:"stall_devices"`
	StallMembers     int           `json:"stall_members"`
	ShardSize        int           `json:"shard_size,omitempty"`
	Brief            bool          `json:"brief"`
	Clock            string        `json:"clock"`
}

// ErrNoURL is returned by Suite.Run without a URL.
var ErrNoURL = errors.New("benchkit: no Redis URL")

// ErrUnknownGroup is returned for a group name not in Groups.
var ErrUnknownGroup = errors.New("benchkit: unknown workload group")

func (s *Suite) settings() (Settings, error) {
	st := Settings{
		Adapters: s.Adapters, Groups: s.Only, Concurrency: s.Concurrency, BatchConcurrency: s.BatchConcurrency,
		Batch: s.Batch, Duration: s.Duration, Users: s.Users, MemoryItems: s.MemoryItems, Backlogs: s.Backlogs, StallDevices: s.StallDevices, StallMembers: s.StallMembers, ShardSize: s.ShardSize, Brief: s.Brief,
		Clock: cmp.Or(s.Clock, ClockServer),
	}
	pick := func(v *int, def, brief int) {
		if *v <= 0 {
			*v = def
			if s.Brief {
				*v = brief
			}
		}
	}
	pick(&st.Concurrency, 16, 8)
	pick(&st.BatchConcurrency, 4, 2)
	pick(&st.Batch, core.MaxBatch, 200)
	pick(&st.Users, 20_000, 2_000)
	pick(&st.MemoryItems, 100_000, 10_000)
	pick(&st.StallDevices, 200_000, 5_000)
	pick(&st.StallMembers, 1_000_000, 10_000)
	if st.Clock != ClockServer && st.Clock != ClockScript {
		return st, fmt.Errorf("benchkit: unknown clock %q (want %s or %s)", st.Clock, ClockServer, ClockScript)
	}
	if st.Batch > core.MaxBatch {
		return st, fmt.Errorf("benchkit: batch %d exceeds core.MaxBatch %d", st.Batch, core.MaxBatch)
	}
	if st.Duration <= 0 {
		st.Duration = 3 * time.Second
		if s.Brief {
			st.Duration = 300 * time.Millisecond
		}
	}
	if len(st.Backlogs) == 0 {
		st.Backlogs = []int{50_000, 1_000_000}
		if s.Brief {
			st.Backlogs = []int{5_000}
		}
	}
	if len(st.Adapters) == 0 {
		st.Adapters = Adapters()
	}
	for _, a := range st.Adapters {
		if !slices.Contains(Adapters(), a) && !slices.Contains(Variants(), a) {
			return st, fmt.Errorf("%w %q", ErrUnknownAdapter, a)
		}
	}
	if len(st.Groups) == 0 {
		st.Groups = Groups()
	}
	for _, g := range st.Groups {
		if !slices.Contains(Groups(), g) && g != GroupCompact {
			return st, fmt.Errorf("%w %q (want some of %v)", ErrUnknownGroup, g, Groups())
		}
	}
	return st, nil
}

// runner is one Suite run in progress.
type runner struct {
	s     *Suite
	st    Settings
	admin *Admin
	rep   *Report
	run   string // this run's key prefix stem
	seq   int
}

// Run runs the selected groups, in the order of Groups(), and returns the
// report, with the targets of issue 8 evaluated for what was measured. It
// leaves its keys behind with their expiry (most within minutes; swept
// backlogs are removed by the sweep itself).
func (s *Suite) Run(ctx context.Context) (*Report, error) {
	if s.URL == "" {
		return nil, ErrNoURL
	}
	st, err := s.settings()
	if err != nil {
		return nil, err
	}
	opt, err := redis.ParseURL(s.URL)
	if err != nil {
		return nil, fmt.Errorf("benchkit: redis URL %q: %w", s.URL, err)
	}
	ac := redis.NewClient(opt)
	defer ac.Close()
	r := &runner{s: s, st: st, admin: NewAdmin(ac),
		run: "pb" + strconv.FormatInt(time.Now().UnixMilli()%1e9, 36)}
	r.rep = &Report{Schema: SchemaVersion, Started: time.Now().UTC().Truncate(time.Second), Host: Host(), Settings: st}
	if s.Miniredis {
		r.rep.Server = ServerInfo{Version: "miniredis", Addr: opt.Addr, Miniredis: true}
	} else if r.rep.Server, err = r.admin.Describe(ctx); err != nil {
		return nil, err
	}
	for _, g := range append(Groups(), GroupCompact) {
		if !slices.Contains(st.Groups, g) {
			continue
		}
		var err error
		switch g {
		case GroupMemory:
			err = r.memory(ctx)
		case GroupThroughput:
			err = r.throughput(ctx)
		case GroupSweep:
			err = r.sweeps(ctx)
		case GroupCache:
			err = r.cache(ctx)
		case GroupStall:
			err = r.stalls(ctx)
		case GroupCompact:
			err = r.compact(ctx)
		}
		if err != nil {
			r.rep.Host.LoadEnd = LoadAvg()
			return r.rep, fmt.Errorf("benchkit: %s: %w", g, err)
		}
	}
	r.rep.Host.LoadEnd = LoadAvg()
	r.rep.Targets = EvaluateTargets(r.rep)
	return r.rep, nil
}

func (r *runner) logf(format string, args ...any) {
	if r.s.Log != nil {
		fmt.Fprintf(r.s.Log, "bench: "+format+"\n", args...)
	}
}

// prefix returns a key prefix no earlier workload of any run used.
func (r *runner) prefix(name string) string {
	r.seq++
	return r.run + "." + strconv.Itoa(r.seq) + "." + name
}

// memoryPrefix is a fresh prefix about as long as the default ("presence"),
// not longer than it needs: memory per item counts key names as users get them.
func (r *runner) memoryPrefix() string {
	r.seq++
	p := r.run + strconv.Itoa(r.seq)
	for len(p) < len("presence") {
		p += "m"
	}
	return p
}

// Scope classes of the workloads: one per layout, all with a 10 min window
// so that a filled backlog stays put until a virtual clock ages it.
const (
	ClassExact   = "bx"
	ClassCompact = "bc"
	ClassApprox  = "ba"
)

// BenchClasses returns the scope classes of the workloads; compact scopes
// get shards shards and shardSize (0: the core's defaults).
func BenchClasses(shards, shardSize int) map[string]core.ScopeClass {
	w := 10 * time.Minute
	return map[string]core.ScopeClass{
		ClassExact:   {Layout: core.LayoutExact, Window: w},
		ClassCompact: {Layout: core.LayoutCompact, Window: w, Shards: shards, ShardSize: shardSize},
		ClassApprox:  {Layout: core.LayoutApprox, Window: w},
	}
}

// LayoutClasses maps each layout's name to its class.
func LayoutClasses() [][2]string {
	return [][2]string{{"exact", ClassExact}, {"compact", ClassCompact}, {"approx", ClassApprox}}
}

// UserID and MemberID name the i-th user and scope member of a workload.
func UserID(i int) string { return "user-" + strconv.Itoa(1_000_000+i) }

// MemberID is the i-th scope member: a decimal user number, as services
// that count "N watching video 10086" usually name users by numeric IDs.
func MemberID(i int) string { return strconv.Itoa(1_000_000 + i) }

// Login logs n users in (one web device "d0" each) by implicit-login
// heartbeats in batches, and returns their session tokens.
func Login(ctx context.Context, e core.Presence, n int, user func(int) string) ([]string, error) {
	tokens := make([]string, n)
	beats := make([]core.Heartbeat, 0, core.MaxBatch)
	for lo := 0; lo < n; lo += core.MaxBatch {
		hi := min(lo+core.MaxBatch, n)
		beats = beats[:0]
		for i := lo; i < hi; i++ {
			beats = append(beats, core.Heartbeat{User: user(i), Device: "d0", Kind: core.KindWeb, Active: true})
		}
		acks, err := opdo.Do[[]core.Ack](ctx, e, core.HeartbeatBatch(beats))
		if err != nil {
			return nil, err
		}
		for j, a := range acks {
			if a.Err != nil {
				return nil, fmt.Errorf("benchkit: login of %s: %w", beats[j].User, a.Err)
			}
			tokens[lo+j] = a.Token
		}
	}
	return tokens, nil
}

// SettleWait is how long Warm waits before its second beat: past the
// default CoalesceWindow (1 s), so that the beat publishes the ONLINE change
// of the login.
const SettleWait = 1100 * time.Millisecond

// Warm waits SettleWait and beats every user once more (web device "d0",
// with its token, in batches), so that each user's ONLINE change is
// published and the workloads that follow measure users who stay online,
// not their first beat after login.
func Warm(ctx context.Context, e core.Presence, users, tokens []string, device func(int) string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(SettleWait):
	}
	beats := make([]core.Heartbeat, 0, core.MaxBatch)
	for lo := 0; lo < len(users); lo += core.MaxBatch {
		beats = beats[:0]
		for i := lo; i < min(lo+core.MaxBatch, len(users)); i++ {
			beats = append(beats, core.Heartbeat{User: users[i], Device: device(i), Kind: core.KindWeb, Token: tokens[i], Active: true})
		}
		acks, err := opdo.Do[[]core.Ack](ctx, e, core.HeartbeatBatch(beats))
		if err != nil {
			return err
		}
		for j, a := range acks {
			if a.Err != nil {
				return fmt.Errorf("benchkit: warm beat of %s: %w", beats[j].User, a.Err)
			}
		}
	}
	return nil
}

// Fill touches members 0..n-1 (named by member) in sc, in batches.
func Fill(ctx context.Context, e core.Presence, sc core.Scope, n int, member func(int) string) error {
	touches := make([]core.ScopeTouch, 0, core.MaxBatch)
	for lo := 0; lo < n; lo += core.MaxBatch {
		touches = touches[:0]
		for i := lo; i < min(lo+core.MaxBatch, n); i++ {
			touches = append(touches, core.ScopeTouch{Scope: sc, Member: member(i)})
		}
		if err := opdo.Err(ctx, e, core.TouchBatch(touches)); err != nil {
			return err
		}
	}
	return nil
}

// SweepAhead runs one scope sweep pass on store as an engine with cfg
// would a class sweep interval from now, so that every scope touched so
// far has its first sweep and with it its count key: reads never write
// (docs/design.md §9), so until then each compact count sums its shards.
func SweepAhead(ctx context.Context, store core.Store, cfg core.Config) error {
	ahead := time.Minute // more than any bench class's sweep interval (default 5 s)
	for _, c := range cfg.Classes {
		ahead = max(ahead, c.SweepInterval+time.Second)
	}
	cfg.Clock = NewVirtualClock(time.Now().Add(ahead)).Now
	e, err := core.New(store, cfg)
	if err != nil {
		return err
	}
	_, err = e.SweepScopes(ctx)
	return err
}
