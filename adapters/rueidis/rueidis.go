package rueidis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/slot"
)

// Interface checks.
var (
	_ core.Store          = (*Store)(nil)
	_ core.CachedReader   = (*Store)(nil)
	_ core.Publisher      = (*Store)(nil)
	_ core.BatchPublisher = (*Store)(nil)
	_ core.Subscriber     = (*Store)(nil)
)

// DefaultCacheTTL is how long CachedGet keeps a key in the client-side cache
// at most, unless WithCacheTTL says otherwise. The server's invalidation
// usually ends an entry sooner; the TTL bounds staleness should an
// invalidation be lost.
const DefaultCacheTTL = 10 * time.Minute

// uncachedLimit is how many reads in a row must come back without
// client-side cache metadata before CachedGet concludes the client does not
// cache (it was built with DisableCache) and reads with plain GETs.
const uncachedLimit = 3

// Store is a core.Store over a rueidis client. It is safe for concurrent use.
type Store struct {
	c        rueidis.Client
	ttl      time.Duration
	observer func(hit bool)

	hits, misses atomic.Uint64
	noCache      atomic.Bool  // CachedGet reads with plain GETs for good
	uncached     atomic.Int32 // reads in a row that bypassed the cache

	mu   sync.Mutex
	subs map[string]int // live subscriptions per channel

	fenceMu sync.Mutex // one FenceCache at a time: see fence.go
}

// Option configures a Store.
type Option func(*Store)

// WithCacheTTL sets the longest time CachedGet keeps a key in the
// client-side cache; DefaultCacheTTL if d <= 0.
func WithCacheTTL(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.ttl = d
		}
	}
}

// WithCacheObserver sets a function that CachedGet calls after each read,
// with whether it was served from the client-side cache, for metrics. It must
// be fast and safe for concurrent use.
func WithCacheObserver(fn func(hit bool)) Option {
	return func(s *Store) { s.observer = fn }
}

// New returns a Store that sends commands through c. The Store does not own
// c: closing c is the caller's job.
func New(c rueidis.Client, opts ...Option) *Store {
	s := &Store{c: c, ttl: DefaultCacheTTL, subs: map[string]int{}}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Eval sends every call with one DoMulti and returns one Result per call, in
// order. A call whose keys span cluster slots is not sent (rueidis would
// panic building it against a cluster) and gets an error that matches
// core.ErrCrossSlot; a call that fails on the server (NOSCRIPT, a Lua error)
// fails alone, the others still get their replies.
func (s *Store) Eval(ctx context.Context, calls []core.Call) []core.Result {
	results := make([]core.Result, len(calls))
	idx := make([]int, 0, len(calls))
	for i, call := range calls {
		if err := slot.Check(call.Keys); err != nil {
			results[i].Err = err
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return results
	}
	if err := ctx.Err(); err != nil {
		err = core.ClassifyError(err) // as a call that runs out of time on the wire
		for _, i := range idx {
			results[i].Err = err
		}
		return results
	}
	cmds := make(rueidis.Commands, len(idx))
	for n, i := range idx {
		cmds[n] = s.build(calls[i])
	}
	for n, resp := range s.c.DoMulti(ctx, cmds...) {
		results[idx[n]] = result(resp)
	}
	return results
}

// build returns EVALSHA SHA, or EVAL SOURCE where the call has one.
func (s *Store) build(call core.Call) rueidis.Completed {
	n := int64(len(call.Keys))
	if call.Source != "" {
		return s.c.B().Eval().Script(call.Source).Numkeys(n).Key(call.Keys...).Arg(call.Args...).Build()
	}
	return s.c.B().Evalsha().Sha1(call.SHA).Numkeys(n).Key(call.Keys...).Arg(call.Args...).Build()
}

// result maps one rueidis reply to a core.Result.
func result(resp rueidis.RedisResult) core.Result {
	msg, err := resp.ToMessage()
	if rueidis.IsRedisNil(err) {
		return core.Result{Value: core.Value{}}
	}
	if err != nil {
		return core.Result{Err: classify(err)}
	}
	v, err := toValue(&msg)
	if err != nil {
		return core.Result{Err: err}
	}
	return core.Result{Value: v}
}

// classify is core.ClassifyError, plus rueidis' own words for a client that
// cannot reach a server just now: ErrClosing and ErrDoCacheAborted for a
// lost connection, ErrNoSlot for a slot whose master left the slot map (a
// failover, until the replica's promotion reaches the map) and ErrNoAddr for
// a cluster client that found no node alive. Server replies are matched by
// their kind (TRYAGAIN, LOADING, CLUSTERDOWN) and then by core's list.
func classify(err error) error {
	if err == nil || errors.Is(err, core.ErrUnavailable) {
		return err
	}
	if errors.Is(err, rueidis.ErrClosing) || errors.Is(err, rueidis.ErrDoCacheAborted) ||
		errors.Is(err, rueidis.ErrNoSlot) || errors.Is(err, rueidis.ErrNoAddr) {
		return fmt.Errorf("%w: %w", core.ErrUnavailable, err)
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) && (re.IsTryAgain() || re.IsLoading() || re.IsClusterDown()) {
		return fmt.Errorf("%w: %w", core.ErrUnavailable, err)
	}
	return core.ClassifyError(err)
}

// toValue maps a reply. RESP3-only types only appear when a script opts in
// with redis.setresp(3); they map as a RESP2 client would see them: true as
// 1, false as nil, doubles as strings, maps as flat key-value arrays (sorted
// by key). An error nested in an array fails the whole call.
func toValue(m *rueidis.RedisMessage) (core.Value, error) {
	switch {
	case m.IsNil():
		return core.Value{}, nil
	case m.IsInt64():
		n, err := m.ToInt64()
		return core.Value{Kind: core.ValueInt, Int: n}, err
	case m.IsString():
		str, err := m.ToString()
		return core.Value{Kind: core.ValueString, Str: str}, err
	case m.IsArray():
		arr, err := m.ToArray()
		if err != nil {
			return core.Value{}, err
		}
		items := make([]core.Value, len(arr))
		for i := range arr {
			if items[i], err = toValue(&arr[i]); err != nil {
				return core.Value{}, err
			}
		}
		return core.Value{Kind: core.ValueArray, Array: items}, nil
	case m.IsMap():
		kv, err := m.ToMap()
		if err != nil {
			return core.Value{}, err
		}
		keys := make([]string, 0, len(kv))
		for k := range kv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		items := make([]core.Value, 0, 2*len(keys))
		for _, k := range keys {
			v := kv[k]
			iv, err := toValue(&v)
			if err != nil {
				return core.Value{}, err
			}
			items = append(items, core.Value{Kind: core.ValueString, Str: k}, iv)
		}
		return core.Value{Kind: core.ValueArray, Array: items}, nil
	case m.IsBool():
		b, err := m.ToBool()
		if b {
			return core.Value{Kind: core.ValueInt, Int: 1}, err
		}
		return core.Value{}, err
	case m.IsFloat64():
		f, err := m.ToFloat64()
		return core.Value{Kind: core.ValueString, Str: strconv.FormatFloat(f, 'f', -1, 64)}, err
	}
	if err := m.Error(); err != nil {
		return core.Value{}, classify(err)
	}
	return core.Value{}, fmt.Errorf("%w: rueidis: reply %s", core.ErrReply, m.String())
}

// CachedGet reads the string at key through the client-side cache: a hit
// costs no round trip, and the server invalidates the entry when the key
// changes. A missing key reads as a nil Value. Where the client does not
// cache (built with DisableCache, or the server lost CLIENT TRACKING),
// CachedGet detects it once and reads with plain GETs for the life of the
// Store; those reads count as misses.
func (s *Store) CachedGet(ctx context.Context, key string) (core.Value, error) {
	if s.noCache.Load() {
		return s.plainGet(ctx, key)
	}
	resp := s.c.DoCache(ctx, s.c.B().Get().Key(key).Cache(), s.ttl)
	msg, err := resp.ToMessage()
	if err != nil && !rueidis.IsRedisNil(err) {
		if cacheUnsupported(err) {
			s.noCache.Store(true)
			return s.plainGet(ctx, key)
		}
		if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "OOM") {
			// A cache fill reads in a MULTI, which Redis refuses over
			// maxmemory; a plain GET still reads.
			return s.plainGet(ctx, key)
		}
		return core.Value{}, classify(err)
	}
	hit := resp.IsCacheHit()
	if hit || resp.CachePXAT() > 0 {
		s.uncached.Store(0)
	} else if s.uncached.Add(1) >= uncachedLimit {
		// A cached read always carries its expiry; three reads in a row
		// without one came from a client that does not cache.
		s.noCache.Store(true)
	}
	s.record(hit)
	if err != nil {
		return core.Value{}, nil
	}
	return toValue(&msg)
}

func (s *Store) plainGet(ctx context.Context, key string) (core.Value, error) {
	r := result(s.c.Do(ctx, s.c.B().Get().Key(key).Build()))
	if r.Err != nil {
		return core.Value{}, r.Err
	}
	s.record(false)
	return r.Value, nil
}

// cacheUnsupported reports whether err says the connection cannot do
// client-side caching.
func cacheUnsupported(err error) bool {
	if errors.Is(err, rueidis.ErrNoCache) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "tracking") || strings.Contains(msg, "client-side cach")
}

func (s *Store) record(hit bool) {
	if hit {
		s.hits.Add(1)
	} else {
		s.misses.Add(1)
	}
	if s.observer != nil {
		s.observer(hit)
	}
}

// CacheStats returns how many CachedGet reads were served from the
// client-side cache (hits) and how many went to the server (misses).
func (s *Store) CacheStats() (hits, misses uint64) {
	return s.hits.Load(), s.misses.Load()
}

// Caching reports whether CachedGet still reads through the client-side
// cache, false once it has fallen back to plain GETs.
func (s *Store) Caching() bool { return !s.noCache.Load() }

// Publish sends message on channel with PUBLISH. On a cluster it goes
// through the node that serves the channel name's slot, as if the name were a
// key, so that the messages of one channel keep their order (PUBLISH has no
// key, and rueidis would otherwise pick any node).
func (s *Store) Publish(ctx context.Context, channel string, message []byte) error {
	cmd := s.c.B().Publish().Channel(channel).Message(string(message)).Build().SetSlot(channel)
	err := s.c.Do(ctx, cmd).Error()
	if err != nil {
		return classify(err)
	}
	return nil
}

// PublishBatch sends msgs with PUBLISH in one DoMulti: on a cluster,
// rueidis pipelines each node's share, every message through the node that
// serves its channel's slot, as Publish does.
func (s *Store) PublishBatch(ctx context.Context, msgs []core.Message) error {
	cmds := make(rueidis.Commands, len(msgs))
	for i, m := range msgs {
		cmds[i] = s.c.B().Publish().Channel(m.Channel).Message(string(m.Payload)).Build().SetSlot(m.Channel)
	}
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return classify(err)
		}
	}
	return nil
}
