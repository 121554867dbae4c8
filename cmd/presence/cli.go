package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// cli is the command line of one subcommand: its flags and its help. Every
// subcommand parses through it, so that help, bad flags and exit codes
// behave the same everywhere.
type cli struct {
	*flag.FlagSet
	name     string // as typed after "presence": "demo", "serve token"
	synopsis string // the usage line(s), without "usage: "
	about    string // what the command does, a paragraph
	env      bool   // flags may also be set as PRESENCE_<NAME> (see envPrefix)
}

// newCLI returns the command line of the subcommand name. The flag package
// prints nothing itself: help goes to stdout when asked for, and a bad flag
// is reported once, by run, with a hint instead of the whole usage.
func newCLI(name, synopsis, about string) *cli {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cli{FlagSet: fs, name: name, synopsis: synopsis, about: about}
}

// parse applies the environment (if c.env), then args. It returns
// flag.ErrHelp after printing the help to stdout on -h or --help, and a
// usageError for an unknown flag, a bad value or a positional argument.
func (c *cli) parse(args []string, stdout io.Writer) error {
	var bad []string
	if c.env {
		c.VisitAll(func(fl *flag.Flag) {
			name := envPrefix + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
			if v, ok := os.LookupEnv(name); ok {
				if err := fl.Value.Set(v); err != nil {
					bad = append(bad, fmt.Sprintf("%s=%q: %v", name, v, err))
				}
			}
		})
	}
	if err := c.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.help(stdout)
			return err
		}
		return c.usageError(twoDashes(err.Error()))
	}
	// Reported after the command line, so that --help works whatever the
	// environment holds.
	if len(bad) > 0 {
		return c.usageError("bad environment: " + strings.Join(bad, "; "))
	}
	if c.NArg() > 0 {
		return c.usageError(fmt.Sprintf("unexpected argument %q", c.Arg(0)))
	}
	return nil
}

// usageError is a mistake in this command line.
func (c *cli) usageError(msg string) error { return usageError{msg: msg, cmd: c.name} }

// help prints the synopsis, what the command does, and every flag with its
// default.
func (c *cli) help(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", c.synopsis, strings.TrimSpace(c.about))
	// PrintDefaults decides which defaults are worth showing; its lines
	// name flags with one dash, the README and the hints with two (the flag
	// package takes either).
	var b bytes.Buffer
	c.SetOutput(&b)
	c.PrintDefaults()
	c.SetOutput(io.Discard)
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if strings.HasPrefix(line, "  -") {
			line = "  --" + line[len("  -"):]
		}
		io.WriteString(w, line)
	}
}

// usageError is a mistake in the command line: it exits with code 2 and a
// hint at the help of cmd (the subcommand when empty).
type usageError struct {
	msg string
	cmd string
}

func (e usageError) Error() string { return e.msg }

// twoDashes names flags in the flag package's errors as the help does,
// with two dashes: "unknown flag --bogus", not "flag provided but not
// defined: -bogus".
func twoDashes(msg string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name
	}
	for _, s := range []string{"for flag -", "flag needs an argument: -"} {
		if i := strings.Index(msg, s); i >= 0 {
			return msg[:i] + strings.TrimSuffix(s, "-") + "--" + msg[i+len(s):]
		}
	}
	return msg
}
