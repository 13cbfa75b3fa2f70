// Package docs holds flexslurm's documentation. Its test keeps the pages
// readable and their cross-references true: no paragraph over
// maxParagraphWords, every relative link to an existing file, and every
// reference of the form `docs/PAGE.md, "Section"` (in code or docs) to a
// section that PAGE has.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxParagraphWords is the longest paragraph (or list item's paragraph) a
// page may have. Tables and code blocks are not paragraphs.
const maxParagraphWords = 120

// pages returns every Markdown page a reader is sent to: README.md,
// BENCHMARKS.md, deploy/README.md and everything under docs/, relative to
// the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md", "BENCHMARKS.md", "deploy/README.md"}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			out = append(out, filepath.ToSlash(filepath.Join("docs", path)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var listItem = regexp.MustCompile(`^\s*([-*]|\d+\.)\s`)

// paragraphs splits a page into its paragraphs (a list item starts one),
// each with the line it starts on, leaving out headings, tables, HTML and
// fenced code.
func paragraphs(text string) (out []paragraph) {
	var cur []string
	start, inCode := 0, false
	flush := func() {
		if len(cur) > 0 {
			out = append(out, paragraph{line: start, text: strings.Join(cur, " ")})
		}
		cur = nil
	}
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			inCode = !inCode
		case inCode:
		case trimmed == "", strings.HasPrefix(l, "#"), strings.HasPrefix(trimmed, "|"), strings.HasPrefix(trimmed, "<"):
			flush()
		case listItem.MatchString(l):
			flush()
			cur, start = []string{l}, i+1
		default:
			if len(cur) == 0 {
				start = i + 1
			}
			cur = append(cur, l)
		}
	}
	flush()
	return out
}

type paragraph struct {
	line int
	text string
}

// TestParagraphsAreShort: a newcomer reads pages whose paragraphs each make
// one point; a longer one is a list or two paragraphs.
func TestParagraphsAreShort(t *testing.T) {
	for _, p := range pages(t) {
		for _, para := range paragraphs(read(t, p)) {
			if n := len(strings.Fields(para.text)); n > maxParagraphWords {
				t.Errorf("%s:%d: a paragraph of %d words (at most %d): %.60s…", p, para.line, n, maxParagraphWords, strings.TrimSpace(para.text))
			}
		}
	}
}

func TestParagraphsSplit(t *testing.T) {
	got := paragraphs("# T\n\none\ntwo\n\n- a\n  b\n- c\n\n```\nx y\n```\n| a | b |\nlast")
	want := []string{"one two", "- a   b", "- c", "last"}
	if len(got) != len(want) {
		t.Fatalf("paragraphs = %v, want %q", got, want)
	}
	for i := range want {
		if got[i].text != want[i] {
			t.Errorf("paragraph %d = %q, want %q", i, got[i].text, want[i])
		}
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s#]+\.(?:md|svg|json|yaml))(#[^)]*)?\)`)

// TestLinksResolve: every relative link of a page names a file that exists.
func TestLinksResolve(t *testing.T) {
	for _, p := range pages(t) {
		for _, m := range mdLink.FindAllStringSubmatch(read(t, p), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			path := filepath.Join("..", filepath.Dir(filepath.FromSlash(p)), filepath.FromSlash(target))
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", p, target)
			}
		}
	}
}

var (
	pageRef = regexp.MustCompile(`(?:docs/)?(?:design/)?[a-z0-9-]+\.md`)
	// a section title in quotes after the page: `docs/x.md`, "Title" or
	// (docs/x.md, "Title") or docs/x.md "Title".
	sectionAfter = regexp.MustCompile(`^[` + "`" + `)\]]*\s*,?\s*\(?\\?"([A-Z` + "`" + `][^"\\]+)`)
	// comment markers and indentation where a reference breaks across lines.
	lineBreak = regexp.MustCompile(`\s*\n\s*(?://|#)?\s*`)
	heading   = regexp.MustCompile(`(?m)^#+\s+(.+?)\s*$`)
	boldLead  = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// TestSectionReferencesResolve: a reference to a page's section, in code or
// docs, names a heading (or a bold lead-in) that the page has. Titles
// broken across comment lines are joined first.
func TestSectionReferencesResolve(t *testing.T) {
	titles := map[string][]string{} // page → headings and bold lead-ins
	for _, p := range pages(t) {
		text := read(t, p)
		for _, m := range heading.FindAllStringSubmatch(text, -1) {
			titles[p] = append(titles[p], m[1])
		}
		for _, m := range boldLead.FindAllStringSubmatch(text, -1) {
			titles[p] = append(titles[p], strings.TrimSuffix(m[1], "."))
		}
	}
	var sources []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && (strings.HasPrefix(name, ".") && path != ".." || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".md") || strings.HasSuffix(name, ".tf") || strings.HasSuffix(name, ".sh")) {
			sources = append(sources, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, src := range sources {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		rel, _ := filepath.Rel("..", src)
		rel = filepath.ToSlash(rel)
		for _, loc := range pageRef.FindAllStringIndex(text, -1) {
			ref := text[loc[0]:loc[1]]
			page := resolvePage(rel, ref)
			known, ok := titles[page]
			if !ok {
				continue // not one of the pages (a file of another project, a placeholder)
			}
			after := text[loc[1]:min(len(text), loc[1]+200)]
			m := sectionAfter.FindStringSubmatch(lineBreak.ReplaceAllString(after, " "))
			if m == nil {
				continue
			}
			title := strings.TrimSpace(m[1])
			checked++
			if !hasTitle(known, title) {
				t.Errorf("%s refers to %s, %q, which has no such section", rel, page, title)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d section references found; the pattern no longer matches how the code cites docs", checked)
	}
}

// resolvePage turns a reference found in file src into a page path from the
// repository root: "docs/x.md" as it is, "x.md" relative to src's directory.
func resolvePage(src, ref string) string {
	if strings.HasPrefix(ref, "docs/") || ref == "README.md" || ref == "BENCHMARKS.md" {
		return ref
	}
	dir := filepath.ToSlash(filepath.Dir(src))
	if dir == "." {
		return ref
	}
	return filepath.ToSlash(filepath.Join(dir, ref))
}

// hasTitle reports whether title is one of known, or the start of one (a
// reference may give a title's first words).
func hasTitle(known []string, title string) bool {
	for _, k := range known {
		k = strings.Trim(k, "`")
		if strings.EqualFold(k, title) || strings.HasPrefix(strings.ToLower(k), strings.ToLower(title)) {
			return true
		}
	}
	return false
}
