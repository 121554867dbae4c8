package conformance_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	goredisadapter "github.com/presencekit/presence/adapters/goredis"
	redigoadapter "github.com/presencekit/presence/adapters/redigo"
	rueidisadapter "github.com/presencekit/presence/adapters/rueidis"
	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/core"
)

// The examples of the three drivers (README, "Drivers") run on an embedded
// miniredis; against a real server only the address changes.

// walk runs the same few calls on an engine, whatever its driver.
func walk(store core.Store) {
	ctx := context.Background()
	eng, err := core.New(store, core.Config{})
	if err != nil {
		panic(err)
	}
	ack, err := eng.Login(ctx, core.Login{User: "alice", Device: "phone", Kind: core.KindIOS, Gateway: "gw-1"})
	if err != nil {
		panic(err)
	}
	if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "phone", Token: ack.Token, Active: true}); err != nil {
		panic(err)
	}
	st, err := eng.Status(ctx, "alice")
	if err != nil {
		panic(err)
	}
	fmt.Println("alice:", st.Status, "on", len(st.Devices), "device")
	room := core.Scope{Class: "room", ID: "888"}
	for _, u := range []string{"alice", "bob"} {
		if err := eng.Touch(ctx, room, u); err != nil {
			panic(err)
		}
	}
	n, err := eng.Count(ctx, room)
	if err != nil {
		panic(err)
	}
	fmt.Println("room 888:", n.N, "online")
}

// Example_goredis: the go-redis adapter takes any redis.UniversalClient (a
// Client, a ClusterClient, a FailoverClient).
func Example_goredis() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	defer client.Close()

	walk(goredisadapter.New(client))
	// Output:
	// alice: ONLINE on 1 device
	// room 888: 2 online
}

// Example_redigo: the redigo adapter takes a *redis.Pool (or, with
// NewCluster, a *redisc.Cluster).
func Example_redigo() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	pool := &redigo.Pool{
		DialContext: func(ctx context.Context) (redigo.Conn, error) {
			return redigo.DialContext(ctx, "tcp", mr.Addr())
		},
		MaxIdle: 4,
	}
	defer pool.Close()

	walk(redigoadapter.New(pool))
	// Output:
	// alice: ONLINE on 1 device
	// room 888: 2 online
}

// Example_rueidis: the rueidis adapter takes a rueidis.Client. Against a
// real Redis 6 or later, leave client-side caching on: compact counts are
// then served from the cache. miniredis has no CLIENT TRACKING, so the
// example turns it off.
func Example_rueidis() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	var client rueidis.Client
	client, err = rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{mr.Addr()},
		DisableCache:      true, // only for miniredis
		ForceSingleClient: true,
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	walk(rueidisadapter.New(client))
	// Output:
	// alice: ONLINE on 1 device
	// room 888: 2 online
}

// ExampleCheck runs a few generated sequences against go-redis on
// miniredis, as "presence conform" does against a server.
func ExampleCheck() {
	target := conformance.MiniredisTargets()[0]
	r := conformance.Check(context.Background(), target, conformance.Options{Sequences: 25, Seed: 1})
	fmt.Println(r.Target, "passed:", r.Passed(), "sequences:", r.Sequences)
	// Output:
	// goredis/miniredis passed: true sequences: 25
}
