// Command genscripts writes what the scripts, the dashboard and the
// browser client's declarations take from package core:
// internal/luascripts/scripts_gen.go, the engine's Lua scripts as Redis
// runs them and their SHA1s (luabuild.Generate), which core sends; the
// names of the statuses, manual statuses, kinds, policies and layouts by
// number (luabuild.JavaScript), as the ES modules
// cmd/internal/server/dashboard/enums.js for the dashboard and
// wasm/js/enums.mjs for the JavaScript hosts; and the generated part of
// clients/js/presence.d.ts (luabuild.TypeScript). Run it with
// `go generate ./core`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/presencekit/presence/core/internal/luabuild"
)

func main() {
	dir := flag.String("dir", ".", "the directory of package core")
	flag.Parse()
	files, err := outputs(*dir)
	for _, f := range files {
		if err == nil {
			err = os.WriteFile(f.path, f.src, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genscripts:", err)
		os.Exit(1)
	}
}

// output is a generated file: its path and what it should hold.
type output struct {
	path string
	src  []byte
}

// outputs returns every file genscripts writes, for package core in dir.
func outputs(dir string) ([]output, error) {
	core := os.DirFS(dir)
	scripts, err := luabuild.Generate(core)
	if err != nil {
		return nil, err
	}
	js, err := luabuild.JavaScript(core)
	if err != nil {
		return nil, err
	}
	dtsPath := filepath.Join(dir, "..", "clients", "js", "presence.d.ts")
	dts, err := os.ReadFile(dtsPath)
	if err != nil {
		return nil, err
	}
	if dts, err = luabuild.TypeScript(core, dts); err != nil {
		return nil, fmt.Errorf("%s: %w", dtsPath, err)
	}
	return []output{
		{filepath.Join(dir, "..", "internal", "luascripts", "scripts_gen.go"), scripts},
		{filepath.Join(dir, "..", "cmd", "internal", "server", "dashboard", "enums.js"), js},
		{filepath.Join(dir, "..", "wasm", "js", "enums.mjs"), js},
		{dtsPath, dts},
	}, nil
}
