package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestNodeUsage(t *testing.T) {
	for _, args := range [][]string{{"node", "-h"}, {"node", "boot", "-h"}, {"node", "boot", "--help"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "usage: flexslurm node boot") || !strings.Contains(out.String(), "-root") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
	for _, args := range [][]string{{"node"}, {"node", "reboot"}, {"node", "boot", "--timeout", "0s"}, {"node", "boot", "extra"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errb.String())
		}
	}
}
