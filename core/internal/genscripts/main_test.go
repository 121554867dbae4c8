package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGenerated fails while a file genscripts writes is not what package
// core's files make: run go generate ./core.
func TestGenerated(t *testing.T) {
	files, err := outputs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.src) {
			t.Errorf("%s is out of date: run go generate ./core", f.path)
		}
	}
}
