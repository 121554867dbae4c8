package rueidis_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	rueidisadapter "github.com/presencekit/presence/adapters/rueidis"
	"github.com/presencekit/presence/core"
)

func Example() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	// miniredis lacks CLIENT TRACKING, so the client must not cache.
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{m.Addr()},
		DisableCache:      true,
		ForceSingleClient: true,
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	store := rueidisadapter.New(client)
	results := store.Eval(context.Background(), []core.Call{
		{Source: "return redis.call('INCR', KEYS[1])", Keys: []string{"{u1}:n"}},
		{SHA: "0000000000000000000000000000000000000000"},
		{Source: "return {KEYS[1], ARGV[1]}", Keys: []string{"{u1}:n"}, Args: []string{"x"}},
	})
	for _, r := range results {
		fmt.Println(r.Value, errors.Is(r.Err, core.ErrNoScript))
	}
	// Output:
	// 1 false
	// nil true
	// ["{u1}:n" "x"] false
}

func ExampleStore_CachedGet() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	m.Set("P:{s7}:n:room:lobby", "3:1700000000000")

	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{m.Addr()},
		DisableCache:      true, // against a real Redis 6+, leave the cache on
		ForceSingleClient: true,
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	store := rueidisadapter.New(client, rueidisadapter.WithCacheObserver(func(hit bool) {
		fmt.Println("cache hit:", hit)
	}))
	v, err := store.CachedGet(context.Background(), "P:{s7}:n:room:lobby")
	fmt.Println(v, err)
	// Output:
	// cache hit: false
	// "3:1700000000000" <nil>
}
