package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// A plan stepped by hand: the caller sends the calls it yields and feeds
// their results back until it ends (here through a Store; an asynchronous
// host would use its own I/O), then publishes its messages.
func ExamplePlanner() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	store := goredis.New(client)

	planner, _ := core.NewPlanner(core.Config{CoalesceWindow: -1})
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	mr.SetTime(now)
	plan := planner.Plan(core.Login{User: "alice", Device: "laptop", Kind: core.KindWeb}, now)
	rounds := 0
	for !plan.Done() {
		plan.Step(store.Eval(context.Background(), plan.Calls()))
		rounds++
	}
	res, err := plan.Result()
	fmt.Println(rounds, "round trips (EVALSHA, then EVAL after NOSCRIPT):", len(res.(core.LoginResult).Changes), "change", err)
	var delivered []string
	for _, m := range plan.Messages() {
		fmt.Println(m.Kind, m.Channel, string(m.Payload))
		delivered = append(delivered, m.ID) // published: its outbox entry may go
	}
	// Acknowledging is a plan too; unacknowledged, a sweep delivers again.
	ack := planner.Plan(core.AckEvents{IDs: delivered}, now)
	for !ack.Done() {
		ack.Step(store.Eval(context.Background(), ack.Calls()))
	}
	_, err = ack.Result()
	fmt.Println("acknowledged:", err)
	// Output:
	// 2 round trips (EVALSHA, then EVAL after NOSCRIPT): 1 change <nil>
	// change presence:changes {"user":"alice","from":"OFFLINE","to":"ONLINE","at":1767258000000,"id":"u7.1767258000000.1"}
	// acknowledged: <nil>
}

// Many operations in flight share round trips: Run sends the pending calls
// of every plan in one Store.Eval per round.
func ExampleEngine_Run() {
	ctx := context.Background()
	eng, clock, stop := exampleEngine(core.Config{Classes: map[string]core.ScopeClass{"room": {Layout: core.LayoutExact}}})
	defer stop()

	pl := eng.Planner()
	alice := pl.Plan(core.Heartbeat{User: "alice", Device: "laptop", Kind: core.KindWeb, Active: true}, clock.t)
	bob := pl.Plan(core.Login{User: "bob", Device: "phone", Kind: core.KindIOS}, clock.t)
	room := pl.Plan(core.ReadCount{Scope: core.Scope{Class: "room", ID: "lobby"}}, clock.t)
	eng.Run(ctx, alice, bob, room)

	_, err := alice.Result()
	fmt.Println("alice:", err)
	_, err = bob.Result()
	fmt.Println("bob:", err)
	c, err := room.Result()
	fmt.Println("lobby:", c.(core.Count).N, err)
	// Output:
	// alice: <nil>
	// bob: <nil>
	// lobby: 0 <nil>
}
