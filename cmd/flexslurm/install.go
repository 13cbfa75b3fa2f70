package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/install"
	"github.com/flexslurm/flexslurm/shared/node"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func init() {
	commands["install"] = command{"install the controller side on a Slurm controller (install controller --project P --spec FILE)", cmdInstall}
	subcommands["install"] = []string{"controller"}
}

func installUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: flexslurm install controller --project P --spec FILE [flags]
       flexslurm install controller --uninstall [flags]

Installs, on a Slurm controller (as root), everything flexslurm needs beside
slurmctld, and prints the slurm.conf lines that run the hooks:
  %s  the cluster spec (a copy of --spec)
  %s  the hooks' configuration
  %s/flexslurm-hook-{resume,suspend,resume-fail,prolog-ctld,epilog-ctld}
      links to the flexslurm binary (--binary)
  %s  spool (0755; root's and the SlurmUser's own subdirectories 0700)
  %s  the agent's ledger, %s  the hooks' logs (the SlurmUser's)
  %s  the agent, as the SlurmUser, restarted on failure
  %s  a oneshot unit that keeps every user but root and the
      SlurmUser from the metadata server, at every boot
then applies that rule (iptables; ip6tables where the host has IPv6),
reloads systemd and enables the firewall unit and enables and (re)starts
the agent. It fails when the rule cannot be applied. Run it again after
changing --spec or --project, or upgrading the binary: what is already in
place is left alone. --uninstall stops and removes it all, keeping a directory
that still holds something (unpublished messages, the ledger, logs).

flags:
`, install.SpecPath, install.HooksConfigPath, install.HookDir, install.SpoolDir, install.StateDir, install.LogDir, install.UnitPath, install.FirewallUnitPath)
}

func cmdInstall(args []string, stdout, stderr io.Writer) int {
	if code, ok := subcommand("install", args, stdout, stderr, installUsage); !ok {
		return code
	}
	args = args[1:]
	fs := flag.NewFlagSet("install controller", flag.ContinueOnError)
	project := fs.String("project", "", "Google Cloud project of the topics (required)")
	specPath := fs.String("spec", "", "cluster spec (cluster_config.json) to install (required)")
	binary := fs.String("binary", "", "absolute path of the flexslurm binary the hooks and the agent run (default: this program)")
	slurmUser := fs.String("slurm-user", "", "the SlurmUser (default: SlurmUser in slurm.conf, or root when it sets none)")
	slurmConf := fs.String("slurm-conf", slurm.DefaultConfPath, "slurm.conf, read for its SlurmUser (under --root)")
	slurmBin := fs.String("slurm-bin", slurm.DefaultBinDir, "directory of scontrol, squeue and sinfo")
	root := fs.String("root", "/", "install under this directory instead of / (tests, images); systemd is left alone")
	dryRun := fs.Bool("dry-run", false, "print what would change, change nothing")
	uninstall := fs.Bool("uninstall", false, "stop the agent and remove what an install created")
	fs.Usage = func() {
		installUsage(fs.Output())
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "flexslurm install controller: %v\n", err)
		return 1
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flexslurm install controller: unexpected arguments %q\n", fs.Args())
		return 2
	}
	r, err := filepath.Abs(*root)
	if err != nil {
		return fail(fmt.Errorf("--root %s: %w", *root, err))
	}
	onHost := r == "/"
	if onHost && !*dryRun && os.Geteuid() != 0 {
		return fail(errors.New("must run as root (or pass --dry-run, or --root DIR)"))
	}
	c := install.Controller{SlurmBinDir: *slurmBin, SlurmConf: *slurmConf}
	if !onHost {
		c.OwnerUID, c.OwnerGID = os.Geteuid(), os.Getegid()
	}
	if err := resolveSlurmUser(&c, r, *slurmUser, *slurmConf); err != nil {
		if !*uninstall && !*dryRun {
			return fail(err)
		}
		if !*uninstall {
			// A dry run shows what would be done even where slurm.conf is
			// not readable yet, saying whose the files would be.
			fmt.Fprintf(stdout, "the SlurmUser is unknown (%v): this dry run takes root\n", err)
		}
		// What an install created is removed whoever owns it: an
		// uninstall needs no slurm.conf (it may be restored already).
		if err := resolveSlurmUser(&c, r, "root", *slurmConf); err != nil {
			return fail(err)
		}
	}
	systemctl := ""
	if onHost && !*dryRun {
		systemctl = findSystemctl()
	}
	if *uninstall {
		if systemctl != "" {
			// A unit that is not installed is not an error here.
			_ = runSystemctl(stdout, systemctl, "disable", "--now", install.UnitName)
			_ = runSystemctl(stdout, systemctl, "disable", "--now", install.FirewallUnitName)
		}
		if onHost && !*dryRun {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := node.RemoveMetadataFirewall(ctx, node.OSHost{}, c.MetadataFirewall(), node.Ip6tablesPath)
			cancel()
			if err != nil {
				return fail(fmt.Errorf("removing the metadata server rule: %w", err))
			}
			fmt.Fprintln(stdout, "metadata server rule removed")
		} else if onHost {
			fmt.Fprintln(stdout, "would remove the metadata server rule (every user but root and the SlurmUser kept out)")
		}
		changes, err := install.Remove(r, c.Installed(), *dryRun)
		printChanges(stdout, changes, *dryRun)
		if err != nil {
			return fail(err)
		}
		if systemctl != "" {
			if err := runSystemctl(stdout, systemctl, "daemon-reload"); err != nil {
				return fail(err)
			}
		}
		fmt.Fprintln(stdout, "\nRemove flexslurm's lines from slurm.conf (its NodeName and PartitionName lines, and these), then restart slurmctld:")
		for _, l := range install.SlurmConfLines() {
			fmt.Fprintln(stdout, "  "+l)
		}
		return 0
	}

	var problems []error
	if *project == "" {
		problems = append(problems, errors.New("--project is required"))
	}
	c.Project = *project
	if *specPath == "" {
		problems = append(problems, errors.New("--spec is required"))
	} else if cl, err := spec.Load(*specPath); err != nil {
		problems = append(problems, fmt.Errorf("--spec: %w", err))
	} else if c.Spec, err = os.ReadFile(*specPath); err != nil {
		problems = append(problems, fmt.Errorf("--spec: %w", err))
	} else {
		c.Cluster = cl.ID
	}
	c.Binary = *binary
	if c.Binary == "" {
		if exe, err := os.Executable(); err == nil {
			c.Binary, _ = filepath.EvalSymlinks(exe)
		}
	}
	if st, err := os.Stat(c.Binary); c.Binary != "" && (err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0) {
		problems = append(problems, fmt.Errorf("--binary %s is not an executable file", c.Binary))
	}
	if err := errors.Join(problems...); err != nil {
		return fail(err)
	}
	items, err := c.Items()
	if err != nil {
		return fail(err)
	}
	changes, err := install.Apply(r, items, *dryRun)
	printChanges(stdout, changes, *dryRun)
	if err != nil {
		return fail(err)
	}
	if onHost {
		// The rule, now and (the firewall unit) at every boot: only root
		// and the SlurmUser reach the metadata server.
		rules, err := node.MetadataRules(c.MetadataFirewall(), node.Ip6tablesPath, "/proc/net/if_inet6")
		if err != nil {
			return fail(fmt.Errorf("the metadata server rule: %w", err))
		}
		if *dryRun {
			for _, rule := range rules {
				fmt.Fprintf(stdout, "%-10s %s\n", "apply", rule)
			}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			added, err := node.EnsureRules(ctx, node.OSHost{}, rules)
			cancel()
			for _, rule := range added {
				fmt.Fprintf(stdout, "%-10s %s\n", "applied", rule)
			}
			if err != nil {
				return fail(fmt.Errorf("the metadata server rule (every user could fetch the controller's token): %w", err))
			}
		}
	}
	switch {
	case systemctl != "":
		if err := runSystemctl(stdout, systemctl, "enable", "--now", install.FirewallUnitName); err != nil {
			return fail(fmt.Errorf("%w (the rule is applied, but will not be after a reboot)", err))
		}
		// Restart even when no installed file changed: after an upgrade the
		// binary the unit runs changed in place, and a restart is safe (the
		// agent's ledger runs each command once).
		for _, args := range [][]string{{"daemon-reload"}, {"enable", install.UnitName}, {"restart", install.UnitName}} {
			if err := runSystemctl(stdout, systemctl, args...); err != nil {
				return fail(fmt.Errorf("%w (the files are installed; start the agent by hand)", err))
			}
		}
	case onHost && !*dryRun:
		fmt.Fprintf(stdout, "\nsystemctl not found: start the agent as %s with the ExecStart line of %s.\n", c.SlurmUser, install.UnitPath)
	}
	fmt.Fprintln(stdout, "\nSet these lines in slurm.conf (the SlurmUser runs them), then restart slurmctld (new NodeName lines need it;\n`scontrol reconfigure` is enough when only these lines change):")
	for _, l := range install.SlurmConfLines() {
		fmt.Fprintln(stdout, "  "+l)
	}
	fmt.Fprintln(stdout, "SlurmctldParameters must include enable_configless (nodes run slurmd --conf-server).")
	fmt.Fprintln(stdout, "HealthCheckInterval runs HealthCheckProgram (Slurm's default, 0, never does); `flexslurm slurm-conf --health-check-interval` changes it.")
	fmt.Fprintf(stdout, "Every line the spec needs — these, nodes, partitions, power saving — and gres.conf: flexslurm slurm-conf [--gres-conf] %s\n", *specPath)
	return 0
}

// resolveSlurmUser sets c's SlurmUser and its ids: the flag, else
// slurm.conf's SlurmUser, else root (Slurm's default).
func resolveSlurmUser(c *install.Controller, root, flagUser, conf string) error {
	name := flagUser
	if name == "" {
		b, err := os.ReadFile(filepath.Join(root, conf))
		if err != nil {
			return fmt.Errorf("reading %s for its SlurmUser: %w (or pass --slurm-user)", conf, err)
		}
		name = slurm.ConfValue(b, "SlurmUser")
		if name == "" {
			name = "root"
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("the SlurmUser %q: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("the SlurmUser %q: %w", name, err)
	}
	c.SlurmUser, c.UID, c.GID = name, uid, gid
	return nil
}

func printChanges(w io.Writer, changes []install.Change, dryRun bool) {
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing is changed; this is what would be done:")
	}
	for _, ch := range changes {
		fmt.Fprintf(w, "%-10s %s\n", ch.Action, ch.Path)
	}
}

func findSystemctl() string {
	for _, p := range []string{"/usr/bin/systemctl", "/bin/systemctl"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// runSystemctl runs systemctl with args, its output on stdout.
func runSystemctl(stdout io.Writer, systemctl string, args ...string) error {
	cmd := exec.Command(systemctl, args...)
	cmd.Stdout, cmd.Stderr = stdout, stdout
	fmt.Fprintf(stdout, "systemctl %s\n", strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("systemctl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
