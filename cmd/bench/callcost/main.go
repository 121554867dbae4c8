// Command callcost counts what one kind of engine call costs a Redis
// server, in instructions, one call at a time. cmd/bench/callcost.sh runs
// it against a redis-server under valgrind's callgrind, which it starts;
// callcost switches callgrind's instrumentation on only around the
// workload (after setting up its users), so the count holds the workload
// alone. An instruction count is the same on any host and under any load
// for the same server binary, scripts and data, where the rates and
// per-item counts of cmd/bench/compare's concurrent rows are not.
//
// Workloads (-workload):
//
//	beat   -n users log in, publish, then beat -beats times one at a time
//	       (each beat steady: a logged-in device, active, nothing due)
//	batch  the same beats, -batch of them a HeartbeatBatch call
//	sweep  -n users log in and publish; their devices expire, and two
//	       sweeps settle them (the first sees each leave, the second
//	       publishes OFFLINE after LeaveDelay and deletes the records)
//
// With -pid 0 (no callgrind) it prints the server's CPU time in scripts
// over the workload instead, on standard error.
//
// Devices have 36-byte IDs shaped as Centrifuge's client IDs, or "d0".."d2"
// with -short. It prints the items of the workload, for callcost.sh to
// divide by.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/core"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "callcost:", err)
		os.Exit(1)
	}
}

// manualClock is the engine's clock in the sweep workload, which moves
// time past the devices' windows without waiting.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }

func run(args []string) error {
	fs := flag.NewFlagSet("callcost", flag.ContinueOnError)
	addr := fs.String("redis", "", "host:port of a throwaway redis-server run under callgrind (required)")
	pid := fs.Int("pid", 0, "pid of that server, for callgrind_control (0: count nothing)")
	workload := fs.String("workload", "beat", "beat, batch or sweep")
	n := fs.Int("n", 1000, "users")
	beats := fs.Int("beats", 2000, "beats of the beat and batch workloads")
	batch := fs.Int("batch", 100, "beats per call of the batch workload")
	short := fs.Bool("short", false, "short device IDs (d0..d2) in place of 36-byte ones")
	buckets := fs.Int("user-buckets", 0, "the engine's Config.UserBuckets (0: its default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return errors.New("-redis is required")
	}
	if *batch < 1 || *batch > core.MaxBatch || *n < 1 {
		return fmt.Errorf("-batch must be 1 to %d and -n positive", core.MaxBatch)
	}
	ctx := context.Background()
	conn, err := benchkit.Dial(ctx, benchkit.AdapterGoRedis, "redis://"+*addr, 4)
	if err != nil {
		return err
	}
	device := func(i int) string {
		if *short {
			return "d" + strconv.Itoa(i%3)
		}
		return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919)
	}
	users := make([]string, *n)
	for i := range users {
		users[i] = benchkit.UserID(i)
	}
	// instrument switches callgrind's counting on, or dumps what it counted
	// since its last dump; without callgrind (-pid 0) it reports the
	// server's CPU time in scripts instead, from INFO commandstats
	plain := redis.NewClient(&redis.Options{Addr: *addr})
	defer plain.Close()
	instrument := func(on bool) error {
		if *pid == 0 {
			if on {
				return plain.ConfigResetStat(ctx).Err()
			}
			info, err := plain.Info(ctx, "commandstats").Result()
			if err != nil {
				return err
			}
			for _, line := range strings.Split(info, "\n") {
				if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
					fmt.Fprintln(os.Stderr, strings.TrimSpace(line))
				}
			}
			return plain.ConfigResetStat(ctx).Err() // each report covers what followed the last
		}
		args := []string{"-d", strconv.Itoa(*pid)}
		if on {
			args = []string{"-i", "on", strconv.Itoa(*pid)}
		}
		if out, err := exec.Command("callgrind_control", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("callgrind_control %v: %v: %s", args, err, out)
		}
		return nil
	}
	if *workload == "sweep" {
		return sweep(ctx, conn.Store, users, device, *buckets, instrument)
	}
	if *workload != "beat" && *workload != "batch" {
		return fmt.Errorf("-workload %q: want beat, batch or sweep", *workload)
	}
	e, err := benchkit.NewEngine(ctx, conn.Store, core.Config{Prefix: "callcost", UserBuckets: *buckets}, benchkit.ClockServer)
	if err != nil {
		return err
	}
	tokens := make([]string, len(users))
	for i, u := range users {
		ack, err := e.Heartbeat(ctx, core.Heartbeat{User: u, Device: device(i), Kind: core.KindWeb, Active: true})
		if err != nil {
			return err
		}
		tokens[i] = ack.Token
	}
	if err := benchkit.Warm(ctx, e, users, tokens, device); err != nil {
		return err
	}
	hb := func(k int) core.Heartbeat {
		i := k % len(users)
		return core.Heartbeat{User: users[i], Device: device(i), Kind: core.KindWeb, Token: tokens[i], Active: true}
	}
	if err := instrument(true); err != nil {
		return err
	}
	size := 1
	if *workload == "batch" {
		size = *batch
	}
	for k := 0; k < *beats; k += size {
		if size == 1 {
			if _, err := e.Heartbeat(ctx, hb(k)); err != nil {
				return err
			}
			continue
		}
		b := make([]core.Heartbeat, 0, size)
		for j := k; j < min(k+size, *beats); j++ {
			b = append(b, hb(j))
		}
		acks, err := e.HeartbeatBatch(ctx, b)
		if err != nil {
			return err
		}
		for _, a := range acks {
			if a.Err != nil {
				return a.Err
			}
		}
	}
	if err := instrument(false); err != nil {
		return err
	}
	fmt.Println(*beats)
	return nil
}

// sweep logs in users on a manual clock, publishes their logins, lets
// their devices expire and counts the two sweeps that settle them.
func sweep(ctx context.Context, store core.Store, users []string, device func(int) string, buckets int, instrument func(bool) error) error {
	clk := &manualClock{t: time.Now()}
	e, err := core.New(store, core.Config{Prefix: "callcost", Clock: clk.Now, UserBuckets: buckets})
	if err != nil {
		return err
	}
	beats := make([]core.Heartbeat, 0, core.MaxBatch)
	for lo := 0; lo < len(users); lo += core.MaxBatch {
		beats = beats[:0]
		for i := lo; i < min(lo+core.MaxBatch, len(users)); i++ {
			beats = append(beats, core.Heartbeat{User: users[i], Device: device(i), Kind: core.KindWeb, Active: true})
		}
		if _, err := e.HeartbeatBatch(ctx, beats); err != nil {
			return err
		}
	}
	clk.t = clk.t.Add(2 * time.Second)
	if _, err := e.SweepUsers(ctx); err != nil {
		return err
	}
	clk.t = clk.t.Add(10 * time.Minute)
	if err := instrument(true); err != nil {
		return err
	}
	// one dump a visit: the first finds the devices gone and sets the
	// OFFLINE change pending for LeaveDelay, the second publishes it
	offline := 0
	for range 2 {
		r, err := e.SweepUsers(ctx)
		if err != nil {
			return err
		}
		if err := instrument(false); err != nil {
			return err
		}
		offline += len(r.Changes)
		clk.t = clk.t.Add(time.Minute)
	}
	if offline != len(users) {
		return fmt.Errorf("the sweeps published %d changes for %d expired devices", offline, len(users))
	}
	fmt.Println(len(users))
	return nil
}
