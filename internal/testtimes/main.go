// Command testtimes reads the output of go test -json on its standard input
// and prints where the time went: each package's wall time, the slowest
// top-level tests, and the counts of tests that passed, failed and skipped.
//
//	go test -json ./... ./cmd/... | go run ./internal/testtimes -top 20
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of go test -json (test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

type result struct {
	name    string
	action  string
	elapsed float64
}

func main() {
	top := flag.Int("top", 20, "how many of the slowest top-level tests to list")
	flag.Parse()
	pkgs, tests, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
	print(os.Stdout, pkgs, tests, *top)
}

// read collects the final action of every package and of every test.
func read(r io.Reader) (pkgs, tests []result, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
			continue
		}
		pkg := strings.TrimPrefix(e.Package, "github.com/presencekit/presence/")
		if e.Test == "" {
			pkgs = append(pkgs, result{pkg, e.Action, e.Elapsed})
			continue
		}
		tests = append(tests, result{pkg + " " + e.Test, e.Action, e.Elapsed})
	}
	return pkgs, tests, sc.Err()
}

func print(w io.Writer, pkgs, tests []result, top int) {
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].elapsed > pkgs[j].elapsed })
	var sum float64
	fmt.Fprintln(w, "packages, slowest first (seconds of wall time each; they run in parallel):")
	for _, p := range pkgs {
		sum += p.elapsed
		fmt.Fprintf(w, "  %8.1f  %-4s  %s\n", p.elapsed, p.action, p.name)
	}
	fmt.Fprintf(w, "  %8.1f  sum over %d packages\n", sum, len(pkgs))

	var topLevel []result
	counts := map[string]int{}
	for _, t := range tests {
		counts[t.action]++
		if !strings.Contains(t.name[strings.Index(t.name, " ")+1:], "/") {
			topLevel = append(topLevel, t)
		}
	}
	sort.Slice(topLevel, func(i, j int) bool { return topLevel[i].elapsed > topLevel[j].elapsed })
	fmt.Fprintf(w, "the %d slowest top-level tests:\n", min(top, len(topLevel)))
	for _, t := range topLevel[:min(top, len(topLevel))] {
		fmt.Fprintf(w, "  %8.1f  %-4s  %s\n", t.elapsed, t.action, t.name)
	}
	fmt.Fprintf(w, "tests and subtests: %d passed, %d failed, %d skipped (top-level: %d)\n",
		counts["pass"], counts["fail"], counts["skip"], len(topLevel))
}
