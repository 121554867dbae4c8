package workerd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/lanes"
)

// freeTierGzip is the most a Worker may weigh, compressed, on Workers
// Free.
const freeTierGzip = 3 << 20

// TestWranglerDryRun bundles the Worker as `wrangler deploy` would, with
// wrangler.jsonc, and checks the upload fits Workers Free. Wrangler runs
// under Deno: it needs Node.js 22 or later, which Deno's Node
// compatibility reports.
func TestWranglerDryRun(t *testing.T) {
	deno := lanes.NPMBin(t, "deno")
	lanes.NPMPackage(t, "wrangler")
	dir := t.TempDir()
	src := lanes.Dir()
	for _, f := range []string{"js/plans.mjs", "js/enums.mjs", "js/resp.mjs", "js/wasi.mjs", "workerd/worker.mjs", "js/reactor.mjs", "workerd/wrangler.jsonc"} {
		copyFile(t, filepath.Join(src, f), filepath.Join(dir, f))
	}
	copyFile(t, lanes.Module(t, wasm.WASI), filepath.Join(dir, "workerd", "presence.wasm"))
	out := filepath.Join(t.TempDir(), "out")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, deno, "run", "-A", "--no-lock", filepath.Join(src, "node_modules", "wrangler", "bin", "wrangler.js"),
		"deploy", "--dry-run", "--outdir", out)
	cmd.Dir = filepath.Join(dir, "workerd")
	cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "NO_COLOR=1", "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wrangler deploy --dry-run: %v\n%s", err, log)
	}
	m := regexp.MustCompile(`Total Upload: ([0-9.]+) KiB / gzip: ([0-9.]+) KiB`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("wrangler printed no upload size:\n%s", log)
	}
	raw, _ := strconv.ParseFloat(string(m[1]), 64)
	gz, _ := strconv.ParseFloat(string(m[2]), 64)
	t.Logf("wrangler deploy --dry-run: %.0f KiB, %.0f KiB gzip", raw, gz)
	if gz*1024 > freeTierGzip {
		t.Errorf("the upload is %.0f KiB gzip, over Workers Free's %d KiB", gz, freeTierGzip>>10)
	}
	for _, f := range []string{"worker.js"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("the bundle lacks %s: %v\n%s", f, err, log)
		}
	}
	if wasms, _ := filepath.Glob(filepath.Join(out, "*presence.wasm")); len(wasms) != 1 {
		t.Errorf("the bundle holds %d presence.wasm, want 1\n%s", len(wasms), log)
	}
}
