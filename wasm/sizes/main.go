// Command sizes builds the WebAssembly modules of the core and prints their
// size, raw and gzip, the size of each section and the code of each Go
// package, largest first. Run it from this module's source tree:
//
//	go run ./wasm/sizes            # both builds, the 25 largest packages
//	go run ./wasm/sizes -n 0 wasip1 # the reactor, every package
//	go run ./wasm/sizes -floor      # and the reactors that hold nothing of ours
//	go run ./wasm/sizes -funcs 40 wasip1 # and the 40 largest functions
//
// The sizes it reports first are those of the stripped builds that
// wasm.Build makes, and so is the breakdown of their data section (the
// pclntab, type descriptors, the Lua scripts, the rest); the breakdown of
// the code comes from a second build that keeps the "name" section,
// which is what the function names are read from.
//
// With -floor it first prints the size of reactors built the same way that
// hold nothing of the module (wasm/internal/sizefloor): Go's runtime alone
// (bare), with package time (time), with crypto/sha1, crypto/sha256 or
// crypto/rand alone (sha1, sha256, rand), and with all three (crypto).
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/wasmsize"
	"os"
	"os/exec"
	"path/filepath"
)

func main() {
	n := flag.Int("n", 25, "packages to list, largest first (0: all)")
	funcs := flag.Int("funcs", 0, "then list the N largest functions")
	floor := flag.Bool("floor", false, "first print the size of reactors that hold nothing of the module")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./wasm/sizes [-n N] [-funcs N] [-floor] [wasip1|js ...]")
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
	if *floor {
		for _, pkg := range []string{"bare", "time", "sha1", "sha256", "rand", "crypto"} {
			if err := reportFloor(pkg); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		fmt.Println()
	}
	for i, t := range targets {
		if i > 0 {
			fmt.Println()
		}
		if err := report(t, *n, *funcs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func report(t wasm.Target, n, funcs int) error {
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
	for _, s := range luascripts.All() {
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
	if funcs > 0 {
		fmt.Printf("  the %d largest functions:\n", funcs)
		for i, f := range rep.Funcs {
			if i == funcs {
				break
			}
			fmt.Printf("    %9d  %s\n", f.Size, f.Name)
		}
	}
	return nil
}

// reportFloor builds wasm/internal/sizefloor/<name> as wasm.Build builds
// the reactor, and prints its size.
func reportFloor(name string) error {
	dir, err := os.MkdirTemp("", "presence-sizefloor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, name+".wasm")
	pkg := "github.com/presencekit/presence/wasm/internal/sizefloor/" + name
	cmd := exec.Command(wasm.GoCommand(), "build", "-trimpath", "-ldflags=-s -w", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", pkg, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	fmt.Printf("floor %s (%s): %s raw, %s gzip -9\n", name, pkg, mb(len(b)), mb(gzipSize(b)))
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
