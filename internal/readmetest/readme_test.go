// Package readmetest holds the test that the README's quick start compiles
// as written.
package readmetest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// quickStartHeading is the README section whose first Go block is the
// quick start.
const quickStartHeading = "## Quick start"

// TestQuickStartCompiles takes the README's quick start as it is written
// and builds it as a program of this module, through a build overlay, so
// that nothing is written into the checkout. Unused variables and imports
// fail it, as they fail a reader who pastes it.
func TestQuickStartCompiles(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := quickStart(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "internal", "readmetest", "quickstart")
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkg, "main.go"): file}})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", overlayFile, "-o", os.DevNull, "./internal/readmetest/quickstart")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's quick start does not compile: %v\n%s\n--- the quick start:\n%s", err, out, src)
	}
}

// quickStart returns the first ```go block after the quick start's heading.
func quickStart(readme string) (string, error) {
	i := strings.Index(readme, quickStartHeading)
	if i < 0 {
		return "", fmt.Errorf("no %q heading in README.md", quickStartHeading)
	}
	rest := readme[i:]
	start := strings.Index(rest, "```go\n")
	if start < 0 {
		return "", fmt.Errorf("no ```go block after %q", quickStartHeading)
	}
	rest = rest[start+len("```go\n"):]
	end := strings.Index(rest, "```")
	if end < 0 {
		return "", fmt.Errorf("the quick start's ```go block does not end")
	}
	return rest[:end], nil
}
