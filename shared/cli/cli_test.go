package cli

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func newFlags() (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	v := fs.Bool("v", false, "verbose")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: demo [-v] ARG")
		fs.PrintDefaults()
	}
	return fs, v
}

func TestParse(t *testing.T) {
	type result struct {
		Code         int
		Done         bool
		Stdout       string
		StderrHasErr bool
		StderrUsage  bool
	}
	tests := []struct {
		name  string
		args  []string
		names string // what stderr names, on an error
		want  result
	}{
		{"flags and an argument", []string{"-v", "x"}, "", result{}},
		{"-h", []string{"-h"}, "", result{Done: true, Stdout: "usage: demo [-v] ARG\n  -v\tverbose\n"}},
		{"--help after a flag", []string{"-v", "--help"}, "", result{Done: true, Stdout: "usage: demo [-v] ARG\n  -v\tverbose\n"}},
		{"unknown flag", []string{"--nope"}, "-nope", result{Code: ExitUsage, Done: true, StderrHasErr: true, StderrUsage: true}},
		{"bad value", []string{"-v=maybe"}, `"maybe"`, result{Code: ExitUsage, Done: true, StderrHasErr: true, StderrUsage: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := newFlags()
			var out, errb bytes.Buffer
			code, done := Parse(fs, tc.args, &out, &errb)
			got := result{Code: code, Done: done, Stdout: out.String(),
				StderrHasErr: tc.names != "" && strings.Contains(errb.String(), tc.names),
				StderrUsage:  strings.Contains(errb.String(), "usage: demo")}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s\nstderr: %q", tc.args, diff, errb.String())
			}
			if fs.Output() != &errb {
				t.Errorf("after Parse the output is not stderr")
			}
		})
	}
}

func TestNoArgs(t *testing.T) {
	fs, _ := newFlags()
	var errb bytes.Buffer
	if _, done := Parse(fs, []string{"-v"}, &bytes.Buffer{}, &errb); done || NoArgs("flexslurm demo", fs, &errb) || errb.Len() != 0 {
		t.Fatalf("no argument: refused, stderr %q", errb.String())
	}
	fs, _ = newFlags()
	if _, done := Parse(fs, []string{"-v", "stray", "-x"}, &bytes.Buffer{}, &errb); done || !NoArgs("flexslurm demo", fs, &errb) {
		t.Fatal("a stray argument is accepted")
	}
	if want := `flexslurm demo: unexpected argument "stray"`; !strings.HasPrefix(errb.String(), want) {
		t.Errorf("stderr %q, want it to start with %q", errb.String(), want)
	}
}
