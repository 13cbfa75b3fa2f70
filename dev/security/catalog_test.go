package security_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information to find the repository root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// attackTests returns every TestAttack… function of the repository's
// tests, as "package/dir TestName".
func attackTests(t *testing.T, root string) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func (TestAttack[A-Za-z0-9_]*)\(t \*testing\.T\)`)
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out = append(out, filepath.ToSlash(rel)+" "+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestSecurityDocListsEveryAttack: docs/security.md's "Attacks tried" table lists every
// TestAttack… test of the repository, each in the package it is in, and
// nothing else, and its figure "N attacks tried, 0 succeeded" counts them.
// Every listed test runs in `make test` (CI runs as root, with Slurm and
// the emulators), so the figure is what the last run showed.
func TestSecurityDocListsEveryAttack(t *testing.T) {
	root := repoRoot(t)
	have := attackTests(t, root)
	b, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, sec, ok := strings.Cut(doc, "\n## Attacks tried\n")
	if !ok {
		t.Fatal(`docs/security.md has no "## Attacks tried" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	row := regexp.MustCompile("(?m)^\\|.*\\| `([a-z0-9/]+)` `(TestAttack[A-Za-z0-9_]*)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	slices.Sort(listed)
	for _, h := range have {
		if !slices.Contains(listed, h) {
			t.Errorf("%s is not listed in docs/security.md's attack table", h)
		}
	}
	for _, l := range listed {
		if !slices.Contains(have, l) {
			t.Errorf("docs/security.md lists %s, which is not a test of that package", l)
		}
	}
	fig := regexp.MustCompile(`\*\*(\d+) attacks tried, 0 succeeded\*\*`).FindStringSubmatch(sec)
	if fig == nil {
		t.Fatal(`the attack table has no "**N attacks tried, 0 succeeded**" line`)
	}
	if n, _ := strconv.Atoi(fig[1]); n != len(have) {
		t.Errorf("docs/security.md says %d attacks tried; the repository has %d TestAttack tests", n, len(have))
	}
	if len(have) < 2 {
		t.Errorf("only %d attack tests found: the walk is broken", len(have))
	}
}
