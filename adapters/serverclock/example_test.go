package serverclock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/adapters/serverclock"
	"github.com/presencekit/presence/core"
)

func Example() {
	ctx := context.Background()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Now().Add(2 * time.Hour)) // a server whose clock is two hours ahead
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	clk, err := serverclock.New(serverclock.Config{})
	if err != nil {
		panic(err)
	}
	eng, err := core.New(goredis.New(client), core.Config{Clock: clk.Now})
	if err != nil {
		panic(err)
	}
	if err := clk.Sync(ctx, eng); err != nil {
		panic(err)
	}
	offset, _, _ := clk.Offset()
	fmt.Println("server ahead by", offset.Round(time.Minute))

	ack, err := eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "laptop", Kind: core.KindWeb, Active: true})
	fmt.Println(err, ack.Token != "")
	// Output:
	// server ahead by 2h0m0s
	// <nil> true
}
