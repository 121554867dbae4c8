//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/presencekit/presence/wasm"
)

// The parts of a first request, in phases.mjs's order.
var phaseNames = []string{"init", "configure", "first_beat"}

// runPhases measures an isolate's first request part by part in Node.js
// and Deno (phases.mjs), for the module and for two reactors of
// wasm/internal/sizefloor, Go's runtime alone (bare) and with crypto/sha1
// (sha1, which brings Go's FIPS 140 module and package time with it):
// under V8's --trace-wasm-compilation-times,
// once stopping after each part, to count the bytes of WebAssembly that
// each part compiles (a count, which the load does not move), and then
// runs times in fresh processes for each part's CPU. It prints one JSON
// line per runtime and module.
func runPhases(ctx context.Context, runs int, runtimes []string, wasmDir, module, replies string) error {
	dir := filepath.Dir(module)
	for _, f := range []string{"bare", "sha1"} {
		if err := buildFloor(ctx, f, filepath.Join(dir, f+".wasm")); err != nil {
			return err
		}
	}
	commit, load := gitCommit(wasmDir), loadAverage()
	for _, rt := range runtimes {
		if rt != "node" && rt != "deno" {
			continue // workerd takes no V8 flags; its parts are in the main figures
		}
		for _, m := range []struct {
			name, file string
			floor      bool
		}{{"presence", module, false}, {"bare", filepath.Join(dir, "bare.wasm"), true}, {"sha1", filepath.Join(dir, "sha1.wasm"), true}} {
			compiled := map[string]int{}
			before := 0
			for _, p := range phaseNames {
				n, _, err := phasesOnce(ctx, rt, wasmDir, m.file, replies, m.floor, p, true)
				if err != nil {
					return fmt.Errorf("%s: %w", rt, err)
				}
				compiled[p], before = n-before, n
				if m.floor {
					break
				}
			}
			ms := map[string][]float64{}
			for range runs {
				_, cpu, err := phasesOnce(ctx, rt, wasmDir, m.file, replies, m.floor, "first_beat", false)
				if err != nil {
					return fmt.Errorf("%s: %w", rt, err)
				}
				for k, v := range cpu {
					ms[k] = append(ms[k], v)
				}
			}
			line := map[string]any{"runtime": rt, "module": m.name, "commit": commit, "runs": runs, "load": load}
			for _, p := range phaseNames {
				if c, ok := compiled[p]; ok {
					line[p+"_wasm_bytes"] = c
				}
				if v, ok := ms[p+"_ms"]; ok {
					line[p+"_ms"] = round1(median(v))
				}
			}
			b, _ := json.Marshal(line)
			fmt.Println(string(b))
		}
	}
	return nil
}

// liftoffLine is V8's trace of a function compiled by its baseline
// compiler: "Compiled function 0x…#123 using Liftoff, took 0 ms and …
// bytes; bodysize 2285 codesize 6952".
var liftoffLine = regexp.MustCompile(`^Compiled function \S+ using Liftoff\b.*\bbodysize (\d+)`)

// phasesOnce runs phases.mjs once in a fresh process up to the part until:
// the CPU of each part, and with trace the bytes of WebAssembly compiled
// in all.
func phasesOnce(ctx context.Context, rt, wasmDir, module, replies string, floor bool, until string, trace bool) (int, map[string]float64, error) {
	args := []string{"phases.mjs", "--wasm", module}
	if floor {
		args = append(args, "--floor")
	} else {
		args = append(args, "--replies", replies, "--until", until)
	}
	var cmd *exec.Cmd
	if rt == "node" {
		if trace {
			args = append([]string{"--trace-wasm-compilation-times"}, args...)
		}
		cmd = exec.CommandContext(ctx, "node", args...)
	} else {
		pre := []string{"run", "--allow-all"}
		if trace {
			pre = append(pre, "--v8-flags=--trace-wasm-compilation-times")
		}
		cmd = exec.CommandContext(ctx, filepath.Join(wasmDir, "node_modules", ".bin", "deno"), append(pre, args...)...)
		cmd.Env = append(os.Environ(), "NO_COLOR=1", "DENO_NO_UPDATE_CHECK=1")
	}
	cmd.Dir = filepath.Join(wasmDir, "bench")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, nil, fmt.Errorf("%v\n%s", err, stderr.String())
	}
	compiled := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := liftoffLine.FindStringSubmatch(sc.Text()); m != nil {
			n, _ := strconv.Atoi(m[1])
			compiled += n
		}
	}
	var cpu map[string]float64
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &cpu); err != nil {
				return 0, nil, fmt.Errorf("phases.mjs printed %q: %v", line, err)
			}
		}
	}
	if cpu == nil {
		return 0, nil, fmt.Errorf("phases.mjs printed no figures:\n%s", stderr.String())
	}
	return compiled, cpu, nil
}

// buildFloor builds wasm/internal/sizefloor/<name> into out as wasm.Build
// builds the reactor.
func buildFloor(ctx context.Context, name, out string) error {
	cmd := exec.CommandContext(ctx, wasm.GoCommand(), "build", "-trimpath", "-ldflags=-s -w", "-buildmode=c-shared", "-o", out,
		"github.com/presencekit/presence/wasm/internal/sizefloor/"+name)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the %s reactor: %v\n%s", name, err, msg)
	}
	return nil
}
