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
	cmds := []command{
		{"bench", "measure the engine on a real Redis: throughput, memory, sweeps", runBench},
		{"history", "print the online history that serve records, as a table or CSV", runHistory},
		{"demo", "walk through presence semantics on an embedded Redis (or --redis)", runDemo},
		{"conform", "run the conformance suite against a server (--redis) and print a table per adapter", runConform},
		{"serve", "run the HTTP service: JSON API, live events, dashboard; 'serve token' signs a client token", runServe},
		{"sim", "simulate users on WASM edge nodes in virtual time, checked against the truth", runSim},
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	return cmds
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes: 0 success (help included), 1 the command failed, 2 the
// command line is wrong, as with the flag package and most Unix tools.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// run dispatches args to a subcommand and returns the exit code. Every
// error is printed here, once, on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "help":
		if len(rest) == 0 {
			usage(stdout)
			return exitOK
		}
		// "presence help serve token" is "presence serve token --help".
		name, rest = rest[0], append(rest[1:len(rest):len(rest)], "--help")
	}
	c, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "presence: unknown command %q\nrun 'presence help' for the list of commands\n", name)
		return exitUsage
	}
	err := c.run(ctx, rest, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		cmd := ue.cmd
		if cmd == "" {
			cmd = c.name
		}
		fmt.Fprintf(stderr, "presence %s: %v\nrun 'presence %s --help' for usage\n", cmd, err, cmd)
		return exitUsage
	}
	fmt.Fprintf(stderr, "presence %s: %v\n", c.name, err)
	return exitFail
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usage lists the subcommands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: presence <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nrun 'presence help <command>' or 'presence <command> --help' for what a command does and its flags")
}
