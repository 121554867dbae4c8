// Command sizes builds the WebAssembly modules of the core and prints their
// size, raw and gzip, the size of each section and the code of each Go
// package, largest first. Run it from this module's source tree:
//
//	go run ./wasm/sizes            # both builds, the 25 largest packages
//	go run ./wasm/sizes -n 0 wasip1 # the reactor, every package
//
// The sizes it reports first are those of the stripped builds that
// wasm.Build makes; the breakdown comes from a second build that keeps the
// "name" section, which is what the function names are read from.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/wasmsize"
)

func main() {
	n := flag.Int("n", 25, "packages to list, largest first (0: all)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./wasm/sizes [-n N] [wasip1|js ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	targets := []wasm.Target{wasm.WASI, wasm.JS}
	if flag.NArg() > 0 {
		targets = nil
		for _, a := range flag.Args() {
			targets = append(targets, wasm.Target(a))
		}
	}
	for i, t := range targets {
		if i > 0 {
			fmt.Println()
		}
		if err := report(t, *n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func report(t wasm.Target, n int) error {
	ctx := context.Background()
	stripped, err := wasm.BuildBytes(ctx, t)
	if err != nil {
		return err
	}
	named, err := buildNamed(ctx, t)
	if err != nil {
		return err
	}
	paths, err := deps(ctx, t)
	if err != nil {
		return err
	}
	rep, err := wasmsize.Parse(named, paths)
	if err != nil {
		return err
	}
	fmt.Printf("%s (%s): %s raw, %s gzip -9\n", t, t.Package(), mb(len(stripped)), mb(gzipSize(stripped)))
	fmt.Printf("  sections (build with names, %s):\n", mb(rep.Total))
	for _, s := range rep.Sections {
		if s.Size >= 1024 {
			fmt.Printf("    %-14s %9d  %5.1f%%\n", s.Name, s.Size, pct(s.Size, rep.Total))
		}
	}
	code := rep.Section("code")
	fmt.Printf("  code by package (%d bytes):\n", code)
	for i, p := range rep.Packages {
		if n > 0 && i == n {
			rest, funcs := 0, 0
			for _, q := range rep.Packages[i:] {
				rest += q.Size
				funcs += q.Funcs
			}
			fmt.Printf("    %9d  %5.1f%%  %5d funcs  (%d more packages)\n", rest, pct(rest, code), funcs, len(rep.Packages)-i)
			break
		}
		fmt.Printf("    %9d  %5.1f%%  %5d funcs  %s\n", p.Size, pct(p.Size, code), p.Funcs, p.Path)
	}
	return nil
}

// buildNamed builds t like wasm.Build but keeps the name section.
func buildNamed(ctx context.Context, t wasm.Target) ([]byte, error) {
	dir, err := os.MkdirTemp("", "presence-sizes-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "named.wasm")
	args := []string{"build", "-trimpath", "-o", out}
	if t == wasm.WASI {
		args = append(args, "-buildmode=c-shared")
	}
	cmd := exec.CommandContext(ctx, wasm.GoCommand(), append(args, t.Package())...)
	cmd.Env = append(os.Environ(), "GOOS="+string(t), "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s: %v: %s", t, err, b)
	}
	return os.ReadFile(out)
}

// deps returns the import paths of the packages that t links.
func deps(ctx context.Context, t wasm.Target) ([]string, error) {
	cmd := exec.CommandContext(ctx, wasm.GoCommand(), "list", "-deps", t.Package())
	cmd.Env = append(os.Environ(), "GOOS="+string(t), "GOARCH=wasm", "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %v", t.Package(), err)
	}
	return strings.Fields(string(out)), nil
}

func gzipSize(b []byte) int {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Len()
}

func mb(n int) string { return fmt.Sprintf("%d B (%.2f MB)", n, float64(n)/1e6) }

func pct(a, b int) float64 { return 100 * float64(a) / float64(b) }
