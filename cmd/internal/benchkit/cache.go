package benchkit

import (
	"context"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

// cacheReads bounds each loop of the cache workload.
const cacheReads = 200_000

func (r *runner) cache(ctx context.Context) error {
	conn, err := Dial(ctx, AdapterRueidis, r.s.URL, 1)
	if err != nil {
		return err
	}
	defer conn.Close()
	plain, err := Dial(ctx, AdapterGoRedis, r.s.URL, 1)
	if err != nil {
		return err
	}
	defer plain.Close()
	prefix := r.prefix("cache")
	cfg := core.Config{Prefix: prefix, Classes: BenchClasses(0, 0)}
	e, err := core.New(conn.Store, cfg)
	if err != nil {
		return err
	}
	ep, err := core.New(plain.Store, cfg)
	if err != nil {
		return err
	}
	sc := core.Scope{Class: ClassCompact, ID: "10086"}
	if err := Fill(ctx, e, sc, 1000, MemberID); err != nil {
		return err
	}
	if err := SweepAhead(ctx, conn.Store, cfg); err != nil { // writes the count key
		return err
	}
	key := keyspace.New(cfg.Prefix, cfg.UserBuckets, cfg.ScopeBuckets).Count(sc.Class, sc.ID)
	d := min(r.st.Duration, 2*time.Second)
	loops := []struct {
		name string
		read func(context.Context) error
	}{
		{"Count via rueidis client-side cache", func(ctx context.Context) error { _, err := e.Count(ctx, sc); return err }},
		{"CachedGet (rueidis adapter)", func(ctx context.Context) error { _, err := conn.Rueidis.CachedGet(ctx, key); return err }},
		{"GET round trip (rueidis)", func(ctx context.Context) error {
			return conn.RueidisClient.Do(ctx, conn.RueidisClient.B().Get().Key(key).Build()).Error()
		}},
		{"Count via goredis (count.lua round trip)", func(ctx context.Context) error { _, err := ep.Count(ctx, sc); return err }},
	}
	for _, l := range loops {
		h0, m0 := conn.Rueidis.CacheStats()
		if err := l.read(ctx); err != nil { // warm: the first cached read misses
			return err
		}
		n := 0
		t0 := time.Now()
		for n < cacheReads && time.Since(t0) < d {
			if err := l.read(ctx); err != nil {
				return err
			}
			n++
		}
		el := time.Since(t0)
		h1, m1 := conn.Rueidis.CacheStats()
		row := CacheRow{Workload: l.name, Reads: n, NsPerRead: round(float64(el.Nanoseconds())/float64(max(n, 1)), 0),
			Hits: h1 - h0, Misses: m1 - m0}
		r.rep.Cache = append(r.rep.Cache, row)
		r.logf("cache: %-42s %8.0f ns/read (%d hits, %d misses)", l.name, row.NsPerRead, row.Hits, row.Misses)
	}
	return nil
}
