package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// InstructionCounter returns how many instructions the server has executed
// so far. Unlike CPU time, the count does not depend on the host's speed or
// load, so a figure per item compares code across machines and runs.
type InstructionCounter func(ctx context.Context) (int64, error)

// Callgrind returns an InstructionCounter of a redis-server running under
// valgrind --tool=callgrind as process pid: it sums the totals that
// callgrind_control -e reports for each of the server's threads. Callgrind
// slows the server by about fifty times, so rates measured against it mean
// nothing; its instructions per item are the figure.
func Callgrind(pid int) InstructionCounter {
	return func(ctx context.Context) (int64, error) {
		out, err := exec.CommandContext(ctx, "callgrind_control", "-e", strconv.Itoa(pid)).Output()
		if err != nil {
			return 0, fmt.Errorf("benchkit: callgrind_control -e %d: %w", pid, err)
		}
		return parseCallgrindTotals(out)
	}
}

// parseCallgrindTotals sums the per-thread lines ("Th 1  28,349,504") that
// follow "Totals:" in callgrind_control -e output.
func parseCallgrindTotals(out []byte) (int64, error) {
	var total int64
	threads := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "Th" {
			continue
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(f[2], ",", ""), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("benchkit: callgrind totals line %q: %w", sc.Text(), err)
		}
		total += n
		threads++
	}
	if threads == 0 {
		return 0, fmt.Errorf("benchkit: no thread totals in callgrind_control output %q", out)
	}
	return total, nil
}
