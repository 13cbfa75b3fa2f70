package node

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

// TestAttackMountInjection plants, in the VM's node config attribute, a
// home directory source that would add mount options as root ("-oexec",
// ",suid"), or a conf server that would add a slurmd option: the bootstrap
// refuses the config at its first step and runs no mount, no iptables and
// no slurmd.
func TestAttackMountInjection(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		set         func(*nodeconfig.Config)
	}{
		{"NFS source as options", "home.source", func(c *nodeconfig.Config) {
			c.Home = nodeconfig.Mount{Type: nodeconfig.MountNFS, Source: "-oexec,suid:/x", Dir: "/home"}
		}},
		{"NFS source adding options", "home.source", func(c *nodeconfig.Config) {
			c.Home = nodeconfig.Mount{Type: nodeconfig.MountNFS, Source: "10.0.0.2:/home,exec,suid", Dir: "/home"}
		}},
		{"bind source adding options", "home.source", func(c *nodeconfig.Config) { c.Home.Source = "/srv/home,suid" }},
		{"mount point as an option", "home.dir", func(c *nodeconfig.Config) { c.Home.Dir = "-oremount" }},
		{"conf server as an option", "conf_server", func(c *nodeconfig.Config) { c.ConfServer = "-fconf" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig())
			cfg := testConfig()
			tc.set(&cfg)
			raw, err := json.Marshal(cfg) // forged: no Encode, which would refuse it
			if err != nil {
				t.Fatal(err)
			}
			m := f.o.Metadata.(fakeMetadata)
			m.attrs = map[string]string{nodeconfig.AttrConfig: string(raw)}
			f.o.Metadata = m
			_, err = Boot(context.Background(), f.o)
			var se *StepError
			if !errors.As(err, &se) || se.Step != event.BootstrapStepIdentity || !strings.Contains(err.Error(), tc.field+": ") {
				t.Fatalf("Boot = %v, want a refusal of the identity step naming %s", err, tc.field)
			}
			if cmds := f.h.commands(); len(cmds) != 0 {
				t.Errorf("commands run with a refused config: %q", cmds)
			}
		})
	}
}

// TestMountArgsEndOptions: whatever the source, "--" comes before it.
func TestMountArgsEndOptions(t *testing.T) {
	for _, m := range []nodeconfig.Mount{
		{Type: nodeconfig.MountNFS, Source: "-oexec:/x", Dir: "/home"},
		{Type: nodeconfig.MountBind, Source: "-oexec", Dir: "/home"},
	} {
		args := MountArgs(m, "/root/home")
		i := slices.Index(args, "--")
		j := slices.Index(args, m.Source)
		if i < 0 || j != i+1 || args[len(args)-1] != "/root/home" {
			t.Errorf("MountArgs(%+v) = %q: want \"--\" right before the source, the mount point last", m, args)
		}
	}
}
