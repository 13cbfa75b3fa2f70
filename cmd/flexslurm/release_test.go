package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReleaseIsStatic runs `make release` for this machine's architecture
// and checks what deploy/README.md promises of its binary: no program
// interpreter and no shared library (it runs on a node image of any libc),
// the version, commit and build date it was given printed by `version`
// and `--version`, and SHA256SUMS naming its hash.
func TestReleaseIsStatic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("release binaries are built for Linux")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("SKIP (loud): make is not installed; make release is not tested")
	}
	dir := t.TempDir()
	const ver, commit, date = "v9.8.7-test", "0123456789abcdef0123456789abcdef01234567", "2026-12-07T08:00:00Z"
	cmd := exec.Command("make", "-C", filepath.Join("..", ".."), "release", "RELEASE_ARCHES="+runtime.GOARCH, "RELEASE_DIR="+dir,
		"VERSION="+ver, "COMMIT="+commit, "BUILD_DATE="+date)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "flexslurm-linux-"+runtime.GOARCH)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter (PT_INTERP): it is dynamically linked", bin)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("%s needs shared libraries %q (DT_NEEDED), err %v: want none", bin, libs, err)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("%s %s: %v", bin, args[0], err)
		}
		want := "flexslurm " + ver + " (commit " + commit + ", built " + date + ", go"
		if !strings.HasPrefix(string(out), want) {
			t.Errorf("%s %s printed %q, want it to start with %q", bin, args[0], out, want)
		}
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	if want := hex.EncodeToString(h[:]) + "  flexslurm-linux-" + runtime.GOARCH + "\n"; string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
	}
}

// TestVersionCommand: `flexslurm version` and `flexslurm --version` print
// the same line, naming the commit and build date even when unknown.
func TestVersionCommand(t *testing.T) {
	var a, b, errs bytes.Buffer
	if code := run([]string{"version"}, &a, &errs); code != 0 {
		t.Fatalf("version: exit %d, stderr %q", code, errs.String())
	}
	if code := run([]string{"--version"}, &b, &errs); code != 0 {
		t.Fatalf("--version: exit %d, stderr %q", code, errs.String())
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "flexslurm ") || !strings.Contains(a.String(), "(commit ") || !strings.Contains(a.String(), ", built ") {
		t.Errorf("version printed %q, --version %q", a.String(), b.String())
	}
}
