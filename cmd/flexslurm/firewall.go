package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/node"
)

func init() {
	commands["metadata-firewall"] = command{"keep every user but root (and --allow-uid) from the metadata server (the controller's oneshot unit runs it)", cmdMetadataFirewall}
}

// uidList is a repeatable --allow-uid.
type uidList []int

func (l *uidList) String() string { return fmt.Sprint([]int(*l)) }

func (l *uidList) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a user id", s)
	}
	*l = append(*l, n)
	return nil
}

func cmdMetadataFirewall(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("metadata-firewall", flag.ContinueOnError)
	var allow uidList
	fs.Var(&allow, "allow-uid", "a user id besides root that may reach the metadata server (repeatable; the SlurmUser on the controller)")
	remove := fs.Bool("remove", false, "remove the rules instead")
	dryRun := fs.Bool("dry-run", false, "print the rules, change nothing")
	host := os.Getenv("GCE_METADATA_HOST")
	if host == "" {
		host = node.DefaultMetadataHost
	}
	fs.StringVar(&host, "metadata-host", host, "the metadata server as IP:PORT ($GCE_METADATA_HOST when set, else Google's)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm metadata-firewall [--allow-uid UID]... [--remove] [--dry-run]\n\nAs root: rejects TCP connections to the metadata server (every port but 53,\nDNS; and Google's IPv6 address fd20:ce::254 where the host has IPv6 and\nip6tables) from every user but root and --allow-uid, with iptables -m owner.\nIdempotent. It fails when the host has a routable IPv6 address but no\nip6tables. `flexslurm install controller` installs a oneshot unit that\nruns it at every boot.")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flexslurm metadata-firewall: unexpected arguments %q\n", fs.Args())
		return 2
	}
	fw := node.MetadataFirewall{Host: host, Allow: allow}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "flexslurm metadata-firewall: %v\n", err)
		return 1
	}
	if *remove {
		if *dryRun {
			return 0
		}
		if err := node.RemoveMetadataFirewall(ctx, node.OSHost{}, fw, node.Ip6tablesPath); err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, "metadata server rules removed")
		return 0
	}
	rules, err := node.MetadataRules(fw, node.Ip6tablesPath, "/proc/net/if_inet6")
	if err != nil {
		return fail(err)
	}
	if *dryRun {
		for _, r := range rules {
			fmt.Fprintln(stdout, "would apply: "+r.String())
		}
		return 0
	}
	added, err := node.EnsureRules(ctx, node.OSHost{}, rules)
	for _, r := range added {
		fmt.Fprintln(stdout, "added: "+r.String())
	}
	if err != nil {
		return fail(err)
	}
	if len(added) == 0 {
		fmt.Fprintln(stdout, "metadata server rules already in place: "+strings.TrimSpace(fmt.Sprint(len(rules)))+" rule(s)")
	}
	return 0
}
