package slurmfuzz

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flexslurm/flexslurm/shared/slurm"
)

// Package slurmfuzz holds the fuzz targets of shared/slurm's parsers, apart
// from that package's tests (which start real slurmctlds): no panic, no
// unbounded allocation, and what parses is consistent. Seed corpora are the
// recorded 22.05 and 24.11 outputs under shared/slurm/testdata plus
// hand-written 23.02+ shapes; `go test` runs them, `make fuzz` explores.

func FuzzHostlist(f *testing.F) {
	for _, s := range []string{"flexvm-a3u-[0-3]", "a3u-[0-1,5,7-9]", "n1,n2,n[3-4]", "x-[001-010]", "bad-[3-1]", "a[", "[]", "n-[0-99999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := slurm.ExpandHostlist(expr)
		if err != nil {
			return
		}
		again, err := slurm.ExpandHostlist(slurm.CompressHostlist(names))
		if err != nil {
			t.Fatalf("the compressed form of %q does not expand: %v", expr, err)
		}
		if len(again) != len(dedupe(names)) {
			t.Fatalf("%q: %d names, compressed and expanded again %d", expr, len(names), len(again))
		}
	})
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func addTestdata(f *testing.F, pattern string) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "*", pattern))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
}

func FuzzParseJSON(f *testing.F) {
	addTestdata(f, "*.json")
	f.Add([]byte(`{"jobs":[{"job_id":1,"job_state":["PENDING"],"nodes":"a-[0-1]"}]}`))
	f.Add([]byte(`{"nodes":[{"name":"a-0","state":["IDLE","CLOUD","POWERED_DOWN"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = slurm.ParseSqueueJSON(data)
		_, _ = slurm.ParseSinfoJSON(data)
	})
}

func FuzzParseShow(f *testing.F) {
	addTestdata(f, "*.txt")
	f.Add([]byte("NodeName=a3u-0 Arch=x86_64 State=IDLE+CLOUD+POWERED_DOWN Reason=x [root@2026-11-30T03:08:57]\n"))
	f.Add([]byte("JobId=7 JobName=x JobState=PENDING Reason=Resources NodeList=(null) TimeLimit=1-00:00:00\n"))
	f.Add([]byte("ReservationName=flexslurm-eol-a StartTime=2026-12-07T10:00:00 Duration=01:00:00 Nodes=a Flags=MAINT\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = slurm.ParseShowNodes(data)
		_, _ = slurm.ParseShowJobs(data)
		_, _ = slurm.ParseShowReservations(data)
		_ = slurm.ParseKV(string(data))
		_, _ = slurm.ParseDuration(string(data))
	})
}
