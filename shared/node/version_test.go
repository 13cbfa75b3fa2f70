package node

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

type versionReporter struct {
	fakeReporter
	got []event.VersionMismatch
}

func (r *versionReporter) VersionMismatch(_ context.Context, project, topic string, ev event.VersionMismatch) error {
	if project != "proj" || topic != "job-pending" {
		return nil
	}
	r.got = append(r.got, ev)
	return nil
}

// TestBootComparesItsVersionWithTheFunctions: a node whose binary is not
// the version recorded in its template boots all the same, logs a warning
// naming both versions, and reports node.version_mismatch once; equal
// versions, or a side that records none, report nothing.
func TestBootComparesItsVersionWithTheFunctions(t *testing.T) {
	for _, tc := range []struct {
		name, node, functions string
		mismatch              bool
	}{
		{"mismatch", "v1.1.0", "v1.2.0", true},
		{"same", "v1.2.0", "v1.2.0", false},
		{"template records none", "v1.2.0", "", false},
		{"node records none", "", "v1.2.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig())
			md := f.o.Metadata.(fakeMetadata)
			if tc.functions != "" {
				md.attrs[nodeconfig.AttrVersion] = tc.functions
			}
			rep := &versionReporter{}
			var logs bytes.Buffer
			f.o.Reporter, f.o.Version, f.o.Log = rep, tc.node, slog.New(slog.NewTextHandler(&logs, nil))
			res, err := Boot(context.Background(), f.o)
			if err != nil {
				t.Fatalf("the bootstrap failed: %v", err)
			}
			if res.VersionMismatch != tc.mismatch {
				t.Errorf("VersionMismatch = %v, want %v", res.VersionMismatch, tc.mismatch)
			}
			warned := strings.Contains(logs.String(), "level=WARN msg=\"flexslurm version mismatch: this node runs flexslurm "+tc.node+", the functions that built its instance template run "+tc.functions)
			if warned != tc.mismatch {
				t.Errorf("warning logged %v, want %v; logs:\n%s", warned, tc.mismatch, logs.String())
			}
			if !tc.mismatch {
				if len(rep.got) != 0 {
					t.Errorf("reported %+v, want nothing", rep.got)
				}
				return
			}
			if len(rep.got) != 1 {
				t.Fatalf("reports %+v, want one", rep.got)
			}
			ev := rep.got[0]
			data, _ := json.Marshal(ev)
			got, err := event.DecodeVersionMismatch(data)
			if err != nil {
				t.Fatalf("the report does not decode: %v", err)
			}
			if got.Node != "flexvm-a3u-1" || got.VMName != testVM || got.NodeVersion != tc.node || got.FunctionsVersion != tc.functions || got.Cluster != "flexvm" {
				t.Errorf("report %+v", got)
			}
			if len(rep.fakeReporter.got) != 0 {
				t.Errorf("a version mismatch reported as a failed bootstrap: %+v", rep.fakeReporter.got)
			}
		})
	}
}

// TestOwnHostnameCommand: the program runs in a UTS namespace of its own
// named after the node (root only: unshare needs CAP_SYS_ADMIN), and the
// host keeps its name.
func TestOwnHostnameCommand(t *testing.T) {
	prog, args := OwnHostnameCommand("flexvm-a3u-1", "/usr/bin/hostname", nil)
	if prog != UnsharePath || len(args) < 6 || args[5] != "flexvm-a3u-1" {
		t.Fatalf("OwnHostnameCommand = %s %q", prog, args)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): not root: unshare --uts cannot run here")
	}
	if _, err := os.Stat(UnsharePath); err != nil {
		t.Skipf("SKIP (loud): %v", err)
	}
	before, _ := os.Hostname()
	out, err := exec.Command(prog, args...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "flexvm-a3u-1" {
		t.Errorf("hostname in the namespace: %q, %v; want flexvm-a3u-1", out, err)
	}
	if after, _ := os.Hostname(); after != before {
		t.Errorf("the host's name changed from %q to %q", before, after)
	}
}
