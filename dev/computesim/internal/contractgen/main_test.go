package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"-h"}, &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if !strings.Contains(out.String(), "usage: contractgen -o FILE") || errb.Len() != 0 {
		t.Errorf("-h printed stdout %q, stderr %q", out.String(), errb.String())
	}
	if err := run(nil, &out, &errb); err == nil || !strings.Contains(err.Error(), "-o FILE is required") {
		t.Errorf("no -o: %v", err)
	}
}

// TestGenerate writes the contract as go generate does and compares it with
// the embedded one.
func TestGenerate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "contract.json")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-o", out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../contract.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("contractgen output differs from dev/computesim/contract.json; run go generate ./dev/computesim")
	}
}
