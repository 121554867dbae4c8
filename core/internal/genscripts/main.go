// Command genscripts writes core/scripts_gen.go, the engine's Lua scripts
// as Redis runs them and their SHA1s, from the files of core/lua
// (luabuild.Generate). Run it with `go generate ./core`.
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
	src, err := luabuild.Generate(os.DirFS(filepath.Join(*dir, "lua")))
	if err == nil {
		err = os.WriteFile(filepath.Join(*dir, "scripts_gen.go"), src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genscripts:", err)
		os.Exit(1)
	}
}
