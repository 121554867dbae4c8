// Command presence runs the presence engine's tools: a demo, and the
// commands listed by "presence help".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
)

// command is one subcommand of presence.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands; each lives in its own file.
func commands() []command {
	return []command{
		{"bench", "measure the engine on a real Redis: throughput, memory, sweeps (presence bench -h)", runBench},
		{"demo", "walk through presence semantics on an embedded Redis (or --redis)", runDemo},
		{"conform", "run the conformance suite against a server (--redis) and print a table per adapter", runConform},
		{"serve", "run the HTTP service: JSON API, live events, dashboard (presence serve -h)", runServe},
		{"sim", "simulate users on WASM edge nodes in virtual time, checked against the truth (presence sim -h)", runSim},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args to a subcommand and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: presence <command> [flags]\n\ncommands:")
		for _, c := range cmds {
			fmt.Fprintf(stderr, "  %-8s %s\n", c.name, c.summary)
		}
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range cmds {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			}
			fmt.Fprintf(stderr, "presence %s: %v\n", c.name, err)
			var ue usageError
			if errors.As(err, &ue) {
				return 2
			}
			return 1
		}
	}
	fmt.Fprintf(stderr, "presence: unknown command %q (try \"presence help\")\n", args[0])
	return 2
}

// usageError marks an error in the command line (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }
