package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLocalArguments: `flexslurm local` rejects a stray argument (which
// would otherwise drop the flags after it) and --help succeeds, both
// without starting anything.
func TestLocalArguments(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := cmdLocal([]string{"extra", "--demo"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), `unexpected argument "extra"`) {
		t.Errorf("local extra --demo: exit %d, stderr %q; want 2 naming the argument", rc, errb.String())
	}
	errb.Reset()
	if rc := cmdLocal([]string{"--help"}, &out, &errb); rc != 0 || !strings.Contains(errb.String(), "usage: flexslurm local") {
		t.Errorf("local --help: exit %d, stderr %q; want 0 with the usage", rc, errb.String())
	}
}
