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

// exampleEngine starts an embedded Redis and an engine on it whose clock
// the example moves by hand.
func exampleEngine(cfg core.Config) (*core.Engine, *manualClock, func()) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	clk := &manualClock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	mr.SetTime(clk.t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	cfg.Clock = clk.Now
	eng, err := core.New(goredis.New(client), cfg)
	if err != nil {
		panic(err)
	}
	return eng, clk, func() { client.Close(); mr.Close() }
}

func Example() {
	ctx := context.Background()
	eng, clock, stop := exampleEngine(core.Config{})
	defer stop()

	eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "laptop", Kind: core.KindWeb, Active: true})
	eng.Heartbeat(ctx, core.Heartbeat{User: "alice", Device: "phone", Kind: core.KindIOS, Background: true})
	st, _ := eng.Status(ctx, "alice")
	fmt.Println(st.Status)
	for _, d := range st.Devices {
		fmt.Println(" ", d.ID, d.State)
	}

	clock.t = clock.t.Add(2 * time.Minute) // the laptop stopped heartbeating
	st, _ = eng.Status(ctx, "alice")
	fmt.Println(st.Status)
	// Output:
	// ONLINE
	//   laptop ONLINE
	//   phone PUSH_ONLINE
	// PUSH_ONLINE
}

func ExampleEngine_Login() {
	ctx := context.Background()
	eng, _, stop := exampleEngine(core.Config{})
	defer stop()

	web, _ := eng.Login(ctx, core.Login{User: "bob", Device: "web", Kind: core.KindWeb, Gateway: "gw-1"})
	exclusive := core.PolicyExclusive
	phone, _ := eng.Login(ctx, core.Login{User: "bob", Device: "phone", Kind: core.KindAndroid, Gateway: "gw-2", Policy: &exclusive})
	for _, k := range phone.Kicked {
		fmt.Println("kicked", k.Device, "on", k.Gateway)
	}
	_, err := eng.Heartbeat(ctx, core.Heartbeat{User: "bob", Device: "web", Token: web.Token})
	fmt.Println(err)
	// Output:
	// kicked web on gw-1
	// presence: session replaced
}

func ExampleEngine_SweepUsers() {
	ctx := context.Background()
	eng, clock, stop := exampleEngine(core.Config{})
	defer stop()

	eng.Login(ctx, core.Login{User: "carol", Device: "web", Kind: core.KindWeb})
	clock.t = clock.t.Add(time.Second) // the coalescing window has passed
	r, _ := eng.SweepUsers(ctx)
	fmt.Println(r.Changes[0].From, "→", r.Changes[0].To)

	eng.Disconnect(ctx, "carol", "web", "")
	clock.t = clock.t.Add(15 * time.Second) // offline for LeaveDelay
	r, _ = eng.SweepUsers(ctx)
	fmt.Println(r.Changes[0].From, "→", r.Changes[0].To)
	// Output:
	// OFFLINE → ONLINE
	// ONLINE → OFFLINE
}

func ExampleEngine_Count() {
	ctx := context.Background()
	eng, _, stop := exampleEngine(core.Config{})
	defer stop()

	video := core.Scope{Class: "video", ID: "10086"} // a compact scope by default
	for _, viewer := range []string{"ann", "ben", "cid", "ann"} {
		eng.Touch(ctx, video, viewer)
	}
	c, _ := eng.Count(ctx, video)
	fmt.Println(c.N, "watching")
	// Output: 3 watching
}

func ExampleNewModel() {
	ctx := context.Background()
	clock := &manualClock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	m, _ := core.NewModel(core.Config{Clock: clock.Now})

	m.Do(ctx, core.Heartbeat{User: "dana", Device: "web", Active: true})
	m.Do(ctx, core.SetManual{User: "dana", Manual: core.ManualDND, TTL: time.Hour})
	v, _ := m.Do(ctx, core.ReadStatus{User: "dana"})
	st := v.(core.UserStatus)
	fmt.Println(st.Status, st.Manual)
	// Output: DND DND
}
