package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedFileIsCurrent fails when wire_gen.go is not what the
// message types declare: run `go generate ./wasm/abi`.
func TestGeneratedFileIsCurrent(t *testing.T) {
	want, err := generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../" + output)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("wasm/abi/%s is out of date: run go generate ./wasm/abi", output)
	}
}
