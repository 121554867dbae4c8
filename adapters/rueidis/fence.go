package rueidis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/presencekit/presence/core"
)

// fenceSuffix names the key FenceCache reads beside each fenced key: the
// same hash tag, so the same slot, node and connection. It is never
// written; reading it costs the server one tracking-table entry per tag.
const fenceSuffix = ":cache-fence"

// fenceTTL is how long rueidis keeps a fence key's empty entry. A fence
// that finds the entry still cached waits this long at most, so that its
// read goes to the server.
const fenceTTL = time.Millisecond

// FenceCache reads, through the client-side cache, a key that is never
// written in the hash tag of each key, and makes sure every such read
// reached the server. rueidis sends a cache fill on the one connection
// that tracks the keys of its slot, where the server queues each
// invalidation ahead of any later reply, and applies those pushes in
// order; so once the fill's reply is in, no entry that a write before
// FenceCache replaced is left. Every key must carry a hash tag ({…}) or
// contain no "}".
func (s *Store) FenceCache(ctx context.Context, keys []string) error {
	if s.noCache.Load() || len(keys) == 0 {
		return nil
	}
	pending := make([]string, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, key := range keys {
		f, err := fenceKey(key)
		if err != nil {
			return err
		}
		if !seen[f] {
			seen[f] = true
			pending = append(pending, f)
		}
	}
	// Fences run one at a time, so a fence never joins another's fill
	// that left before its own writes returned.
	s.fenceMu.Lock()
	defer s.fenceMu.Unlock()
	for len(pending) > 0 {
		reads := make([]rueidis.CacheableTTL, len(pending))
		for i, f := range pending {
			reads[i] = rueidis.CT(s.c.B().Get().Key(f).Cache(), fenceTTL)
		}
		var lapse int64
		cached := pending[:0]
		for i, resp := range s.c.DoMultiCache(ctx, reads...) {
			if err := resp.Error(); err != nil && !rueidis.IsRedisNil(err) {
				if cacheUnsupported(err) {
					s.noCache.Store(true)
					return nil
				}
				return classify(err)
			}
			if resp.IsCacheHit() {
				cached = append(cached, pending[i])
				lapse = max(lapse, resp.CachePXAT())
			}
		}
		pending = cached
		if len(pending) > 0 {
			if err := sleepUntil(ctx, time.UnixMilli(lapse)); err != nil {
				return core.ClassifyError(err)
			}
		}
	}
	return nil
}

// fenceKey returns the fence key in the slot of key.
func fenceKey(key string) (string, error) {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[:open+n+2] + fenceSuffix, nil
		}
	}
	if strings.IndexByte(key, '}') >= 0 {
		return "", fmt.Errorf("%w: rueidis: cannot fence the cache of key %q: it has no hash tag", core.ErrInvalid, key)
	}
	return "{" + key + "}" + fenceSuffix, nil
}

// sleepUntil waits until t (and a millisecond more, the cache's clock
// granularity) or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t) + time.Millisecond)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
