package local

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/localslurm"
	"github.com/flexslurm/flexslurm/dev/slurmtest"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// slurmctldNoise are the slurmctld log errors that do not matter
// (docs/slurm-versions.md): those of every clean start (no saved state
// yet); 22.05's failure to load the PMIx library (MpiDefault=none); 24.11's
// (Debian 13's build) refusal of the glob in the packaged plugstack.conf
// ("include /etc/slurm/plugstack.conf.d/*.conf": no SPANK plugin is used);
// and the clock check slurmctld makes as it starts (it times 1000 calls to
// gettimeofday() and logs "High latency …" past a threshold), which a
// loaded machine trips: it is about the host's load, not the configuration.
var slurmctldNoise = regexp.MustCompile(`Could not open (job|reservation|node|trigger) state file|` +
	`Trying backup state save file|No (job|reservation|node|trigger) state file|` +
	`can not load PMIx library|Couldn't load specified plugin name for mpi/pmix|Cannot create context for mpi/pmix|` +
	`Slurm does not support glob parsing\. /etc/slurm/plugstack\.conf\.d/\*\.conf|"Include" failed in file /etc/slurm/plugstack\.conf line 1|` +
	`High latency for 1000 calls to gettimeofday\(\)`)

// TestLocalSlurmOnEachRelease is the demo's Slurm side on each Slurm
// release (TestLocalSlurmOnEachRelease/slurm-22.05, …/slurm-24.11), in
// seconds where the demo (TestDemo, on both releases too) takes minutes,
// and checking what the demo does not: the local system's slurm.conf for
// examples/cluster_config.json (configless, DefaultTime, sched_interval,
// AuthInfo=cred_expire) is accepted by slurmctld without an error in its
// log, takes effect (scontrol show config), and gives the partitions the
// local system expects, every node powered down.
func TestLocalSlurmOnEachRelease(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "cluster_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spec.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range localslurm.Installations() {
		t.Run("slurm-"+inst.Name, func(t *testing.T) {
			unavailable := func(why string) {
				if env := slurmtest.RequireEnv(inst); os.Getenv(env) == "1" {
					t.Fatalf("FAIL: Slurm %s is required (%s=1): %s", inst.Name, env, why)
				}
				t.Skipf("SKIP (loud): Slurm %s cannot run here: %s", inst.Name, why)
			}
			if os.Geteuid() != 0 {
				unavailable("starting munged and slurmctld needs root")
			}
			if err := inst.Installed(); err != nil {
				unavailable(err.Error())
			}
			dir, err := os.MkdirTemp("", "flexslurm-localconf-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// The hooks never run here: any program the slurm user can run.
			exe := filepath.Join(dir, "flexslurm")
			if err := copyExe("/bin/true", exe); err != nil {
				t.Fatal(err)
			}
			lc, err := localslurm.New(filepath.Join(dir, "slurm"), inst)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			if err := lc.Lock(ctx, true); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := lc.Stop(); err != nil {
					t.Errorf("stopping the cluster: %v", err)
				}
			}()
			if err := lc.WriteConfig(sp, localSlurmConfig(lc.Root, exe)); err != nil {
				t.Fatal(err)
			}
			if err := lc.Start(ctx); err != nil {
				t.Fatal(err)
			}
			r := lc.Runner()
			conf, err := r.Scontrol(ctx, "show", "config")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []*regexp.Regexp{
				regexp.MustCompile(`(?m)^SlurmctldParameters\s*=.*enable_configless`),
				regexp.MustCompile(`(?m)^SchedulerParameters\s*=.*sched_interval=2\b`),
				regexp.MustCompile(`(?m)^AuthInfo\s*=.*cred_expire=10\b`),
			} {
				if !want.Match(conf) {
					t.Errorf("scontrol show config lacks %s", want)
				}
			}
			// Power saving is set on flexslurm's partitions, not cluster-wide.
			partConf, err := r.Scontrol(ctx, "show", "partition")
			if err != nil {
				t.Fatal(err)
			}
			if want := regexp.MustCompile(`\bSuspendTimeout=3\b`); !want.Match(partConf) {
				t.Errorf("scontrol show partition lacks %s:\n%s", want, partConf)
			}
			nodes, err := r.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, n := range nodes {
				if !n.PoweredOff() {
					t.Errorf("node %s is %s, want powered down", n.Name, n.StateString())
				}
				for _, p := range n.Partitions {
					if !slices.Contains(parts, p) {
						parts = append(parts, p)
					}
				}
			}
			slices.Sort(parts)
			want := partitions(lc)
			slices.Sort(want)
			want = slices.Compact(want)
			if !slices.Equal(parts, want) || len(nodes) != len(lc.Nodes()) {
				t.Errorf("sinfo: %d nodes in partitions %v, want %d in %v", len(nodes), parts, len(lc.Nodes()), want)
			}
			log, err := os.ReadFile(slurm.LocalCtldLog(lc.Root))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(log), "\n") {
				if (strings.Contains(line, "error:") || strings.Contains(line, "fatal:")) && !slurmctldNoise.MatchString(line) {
					t.Errorf("slurmctld %s logged: %s", inst.Name, line)
				}
			}
		})
	}
}
