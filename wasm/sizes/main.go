// Command sizes builds the WebAssembly modules of the core and prints their
// size, raw and gzip, the size of each section and the code of each Go
// package, largest first. Run it from this module's source tree:
//
//	go run ./wasm/sizes            # both builds, the 25 largest packages
//	go run ./wasm/sizes -n 0 wasip1 # the reactor, every package
//
// The sizes it reports first are those of the stripped builds that
// wasm.Build makes, and so is the breakdown of their data section (the
// pclntab, type descriptors, the Lua scripts, the rest); the breakdown of
// the code comes from a second build that keeps the "name" section,
// which is what the function names are read from.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/presencekit/presence/core"
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
	rep, err := wasmsize.Build(ctx, t)
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
	var scripts []string
	for _, s := range core.Scripts() {
		scripts = append(scripts, s.Source())
	}
	parts, err := wasmsize.Data(stripped, scripts)
	if err != nil {
		return err
	}
	data := 0
	for _, p := range parts {
		data += p.Size
	}
	fmt.Printf("  data section by content (stripped build, %d bytes of segments):\n", data)
	for _, p := range parts {
		if p.Size > 0 {
			fmt.Printf("    %9d  %5.1f%%  %s\n", p.Size, pct(p.Size, data), p.Name)
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

func gzipSize(b []byte) int {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Len()
}

func mb(n int) string { return fmt.Sprintf("%d B (%.2f MB)", n, float64(n)/1e6) }

func pct(a, b int) float64 { return 100 * float64(a) / float64(b) }
