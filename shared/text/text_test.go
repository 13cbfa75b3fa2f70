package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 0, ""},
		{"abc", 3, "abc"},
		{"abc", 10, "abc"},
		{"abcdef", 5, "ab…"},
		{"abcdef", 4, "a…"},
		{"abcdef", 3, "…"},
		{"abcdef", 2, "ab"},
		{"abcdef", 0, ""},
		{"abcdef", -1, ""},
		// "é" is 2 bytes, "€" 3: a cut inside one drops the whole rune.
		{"ééééé", 6, "é…"},
		{"ééééé", 7, "éé…"},
		{"a€€", 6, "a…"},
		{"€€", 2, ""},
		{"€€", 4, "…"},
		{"€€", 5, "…"},
		{"a€€", 4, "a…"},
	} {
		got := Truncate(tc.s, tc.n)
		if got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestTruncateBoundsAndValidUTF8(t *testing.T) {
	s := strings.Repeat("a€é😀", 20)
	for n := 0; n <= len(s)+1; n++ {
		got := Truncate(s, n)
		if len(got) > max(n, 0) {
			t.Fatalf("Truncate(_, %d) is %d bytes", n, len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Truncate(_, %d) = %q splits a UTF-8 sequence", n, got)
		}
		if n < len(s) && n >= len(Ellipsis) && !strings.HasSuffix(got, Ellipsis) {
			t.Fatalf("Truncate(_, %d) = %q does not mark the cut", n, got)
		}
		if !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis)) {
			t.Fatalf("Truncate(_, %d) = %q is not a prefix of the input", n, got)
		}
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("ééé", 4)
	f.Add("abc", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Truncate(s, n)
		if len(s) <= n && got != s {
			t.Fatalf("Truncate(%q, %d) = %q changed a string that fits", s, n, got)
		}
		if len(got) > max(n, 0) && got != s {
			t.Fatalf("Truncate(%q, %d) = %q is longer than %d bytes", s, n, got, n)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q splits a UTF-8 sequence", s, n, got)
		}
	})
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/plain`:        `/tmp/plain`,
		`/tmp/a\040b\134c`:  `/tmp/a b\c`,
		`/tmp/tab\011end`:   "/tmp/tab\tend",
		`/tmp/short\04`:     `/tmp/short\04`,
		`/tmp/not\0z9octal`: `/tmp/not\0z9octal`,
	} {
		if got := UnescapeMount(in); got != want {
			t.Errorf("UnescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
