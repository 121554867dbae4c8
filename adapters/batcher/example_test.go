package batcher_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/batcher"
	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// A gateway's connection handlers each call Heartbeat; the batcher sends
// what they give it in batch calls.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	eng, err := core.New(goredis.New(client), core.Config{})
	if err != nil {
		panic(err)
	}
	b, err := batcher.New(eng, batcher.Config{})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	ctx := context.Background()
	users := []string{"alice", "bob", "carol"}
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Heartbeat(ctx, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb, Active: true}); err != nil {
				fmt.Println(u, err)
			}
		}()
	}
	wg.Wait()
	sts, err := eng.Statuses(ctx, users)
	if err != nil {
		panic(err)
	}
	for _, st := range sts {
		fmt.Println(st.User, len(st.Devices), "device")
	}
	// Output:
	// alice 1 device
	// bob 1 device
	// carol 1 device
}
