package hooks

import (
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/inputs"
)

// TestAttackHealthReasonNewline: a health check's reasons (the output of a
// program, which may print anything) become the node's drain reason in
// Slurm and the reasons of a health.failure event; each is one line.
func TestAttackHealthReasonNewline(t *testing.T) {
	got := BoundReasons([]string{"GPU 3 lost\nNodeName=flexvm-a3u-2 State=IDLE", "a\rb\u2028c\x00d", "  \n "})
	if len(got) != 2 {
		t.Fatalf("BoundReasons = %q, want two reasons", got)
	}
	for _, r := range got {
		if inputs.HasControl(r) {
			t.Errorf("reason %q holds a control character", r)
		}
	}
	if got[0] != "GPU 3 lost NodeName=flexvm-a3u-2 State=IDLE" || !strings.HasPrefix(got[1], "a b c") {
		t.Errorf("BoundReasons = %q", got)
	}
}
