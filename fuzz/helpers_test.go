package fuzz

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/core"
)

// t0 is the instant every target starts its clock at, unless it fuzzes the
// clock itself. It is not a round number of seconds, so that TTL deadlines
// derived from it rarely coincide with the instants a target visits.
var t0 = time.UnixMilli(1_772_366_400_123)

// source decodes a fuzz input as a stream of small decisions. Reading past
// the end yields zeros, so every decoder is total: any byte string is a
// valid program, and a truncated one is a shorter program.
type source struct {
	b []byte
	i int
}

func newSource(b []byte) *source { return &source{b: b} }

func (s *source) exhausted() bool { return s.i >= len(s.b) }

func (s *source) byte() byte {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return s.b[s.i-1]
}

// intn returns a number in [0, n); it reads two bytes when n needs them.
func (s *source) intn(n int) int {
	if n <= 1 {
		return 0
	}
	if n <= 256 {
		return int(s.byte()) % n
	}
	return int(s.uint16()) % n
}

func (s *source) bool() bool { return s.byte()&1 == 1 }

func (s *source) uint16() uint16 { return uint16(s.byte())<<8 | uint16(s.byte()) }

func (s *source) int64() int64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(s.byte())
	}
	return int64(v)
}

// pick returns one of xs, chosen by the source.
func pick[T any](s *source, xs ...T) T { return xs[s.intn(len(xs))] }

// manualClock is an injected clock (its Now is a core.Config.Clock) that
// tests move by hand. It is safe for concurrent use because the reply
// target reads it from a watchdog goroutine's engine call.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

// Now returns the clock's instant.
func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// redisStore is a minimal core.Store over go-redis, so that the fuzz targets
// do not depend on the adapters (which have their own suites) and exercise
// only the core's exported contract.
type redisStore struct{ c *redis.Client }

// Eval runs each call in turn: EVAL when the call carries the source,
// EVALSHA otherwise, and maps the reply to a core.Value.
func (s redisStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	out := make([]core.Result, len(calls))
	for i, c := range calls {
		args := make([]any, len(c.Args))
		for j, a := range c.Args {
			args[j] = a
		}
		var v any
		var err error
		if c.Source != "" {
			v, err = s.c.Eval(ctx, c.Source, c.Keys, args...).Result()
		} else {
			v, err = s.c.EvalSha(ctx, c.SHA, c.Keys, args...).Result()
		}
		if errors.Is(err, redis.Nil) {
			v, err = nil, nil
		}
		out[i] = core.Result{Value: toValue(v), Err: core.ClassifyError(err)}
	}
	return out
}

func toValue(v any) core.Value {
	switch v := v.(type) {
	case int64:
		return core.Value{Kind: core.ValueInt, Int: v}
	case string:
		return core.Value{Kind: core.ValueString, Str: v}
	case []any:
		items := make([]core.Value, len(v))
		for i, x := range v {
			items[i] = toValue(x)
		}
		return core.Value{Kind: core.ValueArray, Array: items}
	}
	return core.Value{}
}

// recorder is a core.Store that counts and keeps every call before passing
// it on: the identifier target asserts that a rejected request sends
// nothing, and the key-layout target reads the keys of every call.
type recorder struct {
	next core.Store

	mu    sync.Mutex
	evals int
	calls []core.Call
}

// Eval records calls and forwards them.
func (r *recorder) Eval(ctx context.Context, calls []core.Call) []core.Result {
	r.mu.Lock()
	r.evals++
	for _, c := range calls { // kept past Eval: copied (core.Store)
		r.calls = append(r.calls, core.Call{SHA: c.SHA, Source: c.Source, Keys: slices.Clone(c.Keys), Args: slices.Clone(c.Args)})
	}
	r.mu.Unlock()
	return r.next.Eval(ctx, calls)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.evals
}

// taken returns the calls recorded so far and forgets them.
func (r *recorder) taken() []core.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// mini is a miniredis server reached in process (no TCP listener: fuzz
// workers create thousands of them), with its clock tied to clk.
type mini struct {
	mr  *miniredis.Miniredis
	clk *manualClock
	rec *recorder
}

// newMini starts a miniredis at start whose key expiry follows the clock,
// and a recording store over it. Both are closed by tb.Cleanup.
func newMini(tb testing.TB, start time.Time) *mini {
	tb.Helper()
	mr := miniredis.NewMiniRedis()
	mr.SetTime(start)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{
		// Never dialed (Dialer wins), but an IP literal: go-redis resolves
		// a host name in NewClient, which costs tens of milliseconds.
		Addr:            "127.0.0.1:1",
		Dialer:          func(context.Context, string, string) (net.Conn, error) { return mr.Dial() },
		MaxRetries:      -1, // a retried script would run twice; fail instead
		PoolSize:        1,
		DisableIdentity: true,
		Protocol:        2,
	})
	tb.Cleanup(func() {
		c.Close()
		mr.Close()
	})
	return &mini{mr: mr, clk: &manualClock{t: start}, rec: &recorder{next: redisStore{c}}}
}

// set moves the engine's clock and the server's together.
func (m *mini) set(t time.Time) {
	m.clk.set(t)
	m.mr.SetTime(t)
}

// engine returns an engine over the recording store, with cfg's clock set to
// the server's.
func (m *mini) engine(tb testing.TB, cfg core.Config) *core.Engine {
	tb.Helper()
	cfg.Clock = m.clk.Now
	e, err := core.New(m.rec, cfg)
	if err != nil {
		tb.Fatalf("core.New: %v", err)
	}
	return e
}

// validID is the ID rule of docs/design.md §3, written independently of the
// core: non-empty UTF-8, at most 128 bytes, no rune of Unicode categories
// Cc, Cf, Zl or Zp except U+200C and U+200D with a rune on each side, no
// white space first or last.
func validID(s string) bool {
	if s == "" || len(s) > 128 || !utf8.ValidString(s) {
		return false
	}
	rs := []rune(s)
	for i, r := range rs {
		joiner := (r == 0x200C || r == 0x200D) && i > 0 && i < len(rs)-1
		if unicode.In(r, unicode.Cc, unicode.Zl, unicode.Zp) || (unicode.Is(unicode.Cf, r) && !joiner) {
			return false
		}
	}
	return !unicode.IsSpace(rs[0]) && !unicode.IsSpace(rs[len(rs)-1])
}

// validText is UTF-8 without control characters.
func validText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) {
			return false
		}
	}
	return true
}

// validMeta is the metadata rule of docs/design.md §3: at most 16 entries of
// non-empty keys, 1 KiB of keys and values in total, all text.
func validMeta(m map[string]string) bool {
	if len(m) > 16 {
		return false
	}
	total := 0
	for k, v := range m {
		if k == "" || !validText(k) || !validText(v) {
			return false
		}
		total += len(k) + len(v)
	}
	return total <= 1024
}

// errName names an error by the sentinel it matches, for comparing the
// engine's errors with the model's.
func errName(err error) string {
	var ie *core.InputError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ie):
		return "invalid " + ie.Field
	case errors.Is(err, core.ErrSessionReplaced):
		return "replaced"
	case errors.Is(err, core.ErrNoSession):
		return "nosession"
	case errors.Is(err, core.ErrTooManyDevices):
		return "toomany"
	case errors.Is(err, core.ErrClockSkew):
		return "skew"
	case errors.Is(err, core.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, core.ErrReply):
		return "reply"
	}
	return "error " + err.Error()
}

// knownBug skips the current input, naming a core bug documented in
// known_bugs_test.go, so that fuzzing goes on looking for new ones.
func knownBug(t testing.TB, what string) {
	t.Helper()
	t.Skip("known bug: " + what)
}

// startRedis starts a throwaway redis-server on a free loopback port for
// checks that miniredis cannot make (its Lua is not Redis's), or skips
// where none is installed. tb.Cleanup stops it.
func startRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	tb.Cleanup(func() { c.Close() })
	for i := 0; ; i++ {
		if c.Ping(context.Background()).Err() == nil {
			return c
		}
		if i == 100 {
			tb.Fatal("redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// validStatus reports whether s is one of the five statuses.
func validStatus(s core.Status) bool { return s <= core.StatusDND }
