package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/presencekit/presence/conformance"
)

// runConform is "presence conform": the conformance suite against a server.
func runConform(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := conformance.DefaultOptions()
	fs := newCLI("conform", "presence conform [--redis redis://host:port] [flags]", `
Runs the conformance suite: generated sequences of presence operations on
each adapter (go-redis, redigo, rueidis), compared step by step with the
reference model, then a race run of concurrent operations whose history is
checked for linearizability. Without --redis it runs the sequences on an
embedded miniredis. Keys are written under a fresh prefix and deleted at
the end (SCAN MATCH prefix*); nothing else on the server is touched. Exits 1
on a conformance failure or when the suite cannot run to the end.`)
	redisURL := fs.String("redis", "", "redis:// or rediss:// URL of the server to check (default: an embedded miniredis)")
	sequences := fs.Int("sequences", def.Sequences, "generated sequences per adapter")
	steps := fs.Int("steps", conformance.DefaultMaxSteps, "longest sequence, in steps")
	race := fs.Duration("race", def.RaceDuration, "duration of the race run (0: none; needs --redis)")
	seed := fs.Int64("seed", def.Seed, "generator seed, to replay a reported failure (0: random)")
	adapters := fs.String("adapters", strings.Join(conformance.Adapters, ","), "adapters to check, comma-separated")
	noCache := fs.Bool("no-client-cache", false, "turn rueidis client-side caching off (servers without CLIENT TRACKING)")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if *sequences < 1 || *steps < 1 || *race < 0 {
		return usageError{msg: "--sequences and --steps must be positive, --race not negative"}
	}
	want := map[string]bool{}
	for _, a := range strings.Split(*adapters, ",") {
		a = strings.TrimSpace(a)
		if !contains(conformance.Adapters, a) {
			return usageError{msg: fmt.Sprintf("--adapters: unknown adapter %q (have %s)", a, strings.Join(conformance.Adapters, ", "))}
		}
		want[a] = true
	}

	var targets []conformance.Target
	backend := "embedded miniredis"
	if *redisURL == "" {
		targets = conformance.MiniredisTargets()
		*race = 0
	} else {
		u, err := url.Parse(*redisURL)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			return usageError{msg: fmt.Sprintf("--redis %q: want redis://host:port or rediss://host:port", *redisURL)}
		}
		o, err := conformance.ParseServerURL(*redisURL)
		if err != nil {
			return usageError{msg: err.Error()}
		}
		// A server that does not answer would fail every adapter's run in
		// its own words; it is one error, and not the engine's.
		if err := pingRedis(ctx, *redisURL); err != nil {
			return err
		}
		o.NoClientCache = *noCache
		backend = o.Addr
		targets = conformance.ServerTargets(o, o.Addr)
	}
	var picked []conformance.Target
	for _, t := range targets {
		if want[t.Adapter] {
			picked = append(picked, t)
		}
	}

	opts := conformance.Options{Sequences: *sequences, MaxSteps: *steps, Seed: *seed, RaceDuration: *race,
		Cleanup: *redisURL != ""}
	if opts.Seed == 0 {
		opts.Seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	fmt.Fprintf(stdout, "presence conform on %s: %d sequences of up to %d steps per adapter, race run %v, seed %d\n",
		backend, opts.Sequences, opts.MaxSteps, opts.RaceDuration, opts.Seed)

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "adapter\tchecked\ttime\tresult\t")
	var failures []string
	nFail, nErr := 0, 0
	// A server lost during the run fails operations, which the suite counts
	// as departures from the model. After a run that did not pass, the
	// server is asked again: if it no longer answers, it takes the blame,
	// not the engine, and the adapters left are not run against it.
	var lost error
	serverLost := func() error {
		if *redisURL == "" {
			return nil
		}
		if err := pingRedis(ctx, *redisURL); err != nil {
			return fmt.Errorf("%w (lost during the run: the rows above are not conformance results)", err)
		}
		return nil
	}
	for _, t := range picked {
		r := conformance.Check(ctx, t, opts)
		result := "PASS"
		switch {
		case r.Err != nil:
			result = "ERROR: " + r.Err.Error()
			failures = append(failures, r.Summary())
			nErr++
		case r.Failure != "":
			result = "FAIL: " + r.Property
			failures = append(failures, r.Summary()+"\n"+r.Failure)
			nFail++
		}
		checked := fmt.Sprintf("%d sequences, %d steps", r.Sequences, r.Steps)
		if r.CacheHits+r.CacheMisses > 0 {
			checked += fmt.Sprintf(", client cache %d/%d hits", r.CacheHits, r.CacheHits+r.CacheMisses)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t\n", t.Adapter, checked, r.Duration.Round(time.Millisecond), result)
		if ctx.Err() != nil {
			break
		}
		if result != "PASS" {
			if lost = serverLost(); lost != nil {
				break
			}
		}
	}
	if opts.RaceDuration > 0 && ctx.Err() == nil && lost == nil {
		r := conformance.CheckRace(ctx, picked, opts)
		result := "PASS"
		switch {
		case r.Err != nil:
			result = "ERROR: " + r.Err.Error()
			failures = append(failures, r.Summary())
			nErr++
		case r.Failure != "":
			result = "FAIL: " + r.Property
			failures = append(failures, r.Summary()+"\n"+r.Failure)
			nFail++
		}
		checked := fmt.Sprintf("%d histories, %d operations, %d linearizable partitions", r.Rounds, r.Ops, r.Partitions)
		if r.Unknown > 0 {
			checked += fmt.Sprintf(", %d undecided", r.Unknown)
		}
		fmt.Fprintf(tw, "race (all)\t%s\t%v\t%s\t\n", checked, r.Duration.Round(time.Millisecond), result)
		if result != "PASS" {
			lost = serverLost()
		}
	}
	tw.Flush()
	for _, f := range failures {
		fmt.Fprintf(stdout, "\n%s\n", f)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if lost != nil {
		return lost
	}
	// An ERROR row is a run that could not finish (a timeout, a refused
	// command): it says nothing about conformance, and is not called a
	// failure.
	switch {
	case nFail > 0:
		return fmt.Errorf("conformance failures (replay with --seed %d)", opts.Seed)
	case nErr > 0:
		return fmt.Errorf("%d of the runs stopped on an error (see above), so the suite did not finish; no conformance failure was found", nErr)
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
