// Package text holds the string helpers every flexslurm package shares.
// It imports no other flexslurm package.
package text

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Ellipsis marks where Truncate cut a string.
const Ellipsis = "…"

// Truncate bounds s to at most n bytes without splitting a UTF-8 sequence:
// s itself when it fits, otherwise its longest prefix that fits with
// Ellipsis appended (the prefix alone when n is too small to hold the mark).
// Limits on stored and sent text (Slurm reasons, Compute descriptions,
// Firestore fields) are in bytes, so n is.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	mark := Ellipsis
	if n < len(mark) {
		mark = ""
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// UnescapeMount decodes the octal escapes of a path in /proc/self/mountinfo
// (\040 for a space, \134 for a backslash; proc(5):
// https://man7.org/linux/man-pages/man5/proc_pid_mountinfo.5.html).
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
