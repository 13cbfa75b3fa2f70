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

// knownHole is how a TestAttack… test that shows an attack which still
// succeeds begins its body: it is skipped, and listed under "Known holes".
const knownHole = `t.Skip("KNOWN HOLE`

// attackTests returns every TestAttack… function of the repository's
// tests, as "package/dir TestName": those that pass, and those skipped as
// known holes.
func attackTests(t *testing.T, root string) (held, holes []string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func (TestAttack[A-Za-z0-9_]*)\(t \*testing\.T\)`)
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
		src := string(b)
		for _, m := range re.FindAllStringSubmatchIndex(src, -1) {
			name := filepath.ToSlash(rel) + " " + src[m[2]:m[3]]
			body := src[m[1]:]
			if i := strings.Index(body, "\n}\n"); i >= 0 {
				body = body[:i]
			}
			if strings.Contains(body, knownHole) {
				holes = append(holes, name)
			} else {
				held = append(held, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(held)
	slices.Sort(holes)
	return held, holes
}

// section returns the text of the "## title" section of doc.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, sec, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf(`docs/security.md has no "## %s" section`, title)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	return sec
}

// listedTests returns the tests named in a section's table rows, as
// "package/dir TestName".
func listedTests(sec string) []string {
	row := regexp.MustCompile("(?m)^\\|.*\\| `([a-z0-9/]+)` `(TestAttack[A-Za-z0-9_]*)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	slices.Sort(listed)
	return listed
}

// compareListed reports the differences between the tests a section lists
// and those of the repository.
func compareListed(t *testing.T, title string, have, listed []string) {
	t.Helper()
	for _, h := range have {
		if !slices.Contains(listed, h) {
			t.Errorf("%s is not listed in docs/security.md's %q table", h, title)
		}
	}
	for _, l := range listed {
		if !slices.Contains(have, l) {
			t.Errorf("docs/security.md's %q table lists %s, which is not such a test of that package", title, l)
		}
	}
}

// TestSecurityDocListsEveryAttack: docs/security.md's "Attacks tried" table
// lists every TestAttack… test of the repository that runs, each in the
// package it is in, and nothing else, and its figure "N attacks tried, 0
// succeeded" counts them; its "Known holes" table lists every TestAttack…
// test skipped as a known hole (an attack that still succeeds). Every
// listed test runs in `make test` (CI runs as root, with Slurm and the
// emulators), so the figure is what the last run showed.
func TestSecurityDocListsEveryAttack(t *testing.T) {
	root := repoRoot(t)
	have, holes := attackTests(t, root)
	b, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	sec := section(t, doc, "Attacks tried")
	compareListed(t, "Attacks tried", have, listedTests(sec))
	compareListed(t, "Known holes", holes, listedTests(section(t, doc, "Known holes")))
	fig := regexp.MustCompile(`\*\*(\d+) attacks tried, 0 succeeded\*\*`).FindStringSubmatch(sec)
	if fig == nil {
		t.Fatal(`the attack table has no "**N attacks tried, 0 succeeded**" line`)
	}
	if n, _ := strconv.Atoi(fig[1]); n != len(have) {
		t.Errorf("docs/security.md says %d attacks tried; the repository has %d TestAttack tests that are not known holes", n, len(have))
	}
	if len(have) < 2 {
		t.Errorf("only %d attack tests found: the walk is broken", len(have))
	}
}
