package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLocalArguments: `flexslurm local` rejects a stray argument (which
// would otherwise drop the flags after it) and --help prints the usage on stdout, both
// without starting anything.
func TestLocalArguments(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := cmdLocal([]string{"extra", "--demo"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), `unexpected argument "extra"`) {
		t.Errorf("local extra --demo: exit %d, stderr %q; want 2 naming the argument", rc, errb.String())
	}
	out.Reset()
	errb.Reset()
	if rc := cmdLocal([]string{"--help"}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "usage: flexslurm local") || errb.Len() != 0 {
		t.Errorf("local --help: exit %d, stdout %q, stderr %q; want 0 with the usage on stdout", rc, out.String(), errb.String())
	}
}
