package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/preflight"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func init() {
	commands["preflight"] = command{
		"check that the Google APIs service agent may create the node pools' VMs",
		cmdPreflight,
	}
}

// Exit statuses of flexslurm preflight.
const (
	preflightOK       = 0 // the prerequisite is met at project level
	preflightMissing  = 1 // a role is missing; the report says which and how to grant it
	preflightUsage    = 2 // bad flags
	preflightCantTell = 3 // the policy could not be read or the agent could not be identified
	preflightQuota    = 4 // (--spec) a quota cannot hold even one node of a Flex-Start pool
)

func cmdPreflight(args []string, stdout, stderr io.Writer) int {
	return runPreflight(args, stdout, stderr)
}

// runPreflight is cmdPreflight with extra Resource Manager client options
// (tests point it at a fake server).
func runPreflight(args []string, stdout, stderr io.Writer, extra ...option.ClientOption) int {
	return runPreflightWith(args, stdout, stderr, extra, nil)
}

// runPreflightWith is runPreflight with extra Compute client options too
// (tests point them at the simulator).
func runPreflightWith(args []string, stdout, stderr io.Writer, extra, computeOpts []option.ClientOption) int {
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	var o preflight.Options
	fs.StringVar(&o.Project, "project", os.Getenv(config.EnvProject), "project id (default $"+config.EnvProject+"); S3NS ids carry the s3ns: prefix")
	fs.StringVar(&o.Universe, "universe-domain", os.Getenv(config.EnvUniverseDomain), "universe domain, e.g. s3nsapis.fr (default $"+config.EnvUniverseDomain+", else googleapis.com)")
	fs.StringVar(&o.ProjectNumber, "project-number", "", "project number; skips reading the project (resourcemanager.projects.get)")
	fs.StringVar(&o.AgentDomain, "agent-domain", "", "domain of the service agent's address after the @ (default: found in the policy, else cloudservices.gserviceaccount.com)")
	specPath := fs.String("spec", "", "cluster spec (JSON): also check the Compute quotas its Flex-Start pools consume at their maximums")
	timeout := fs.Duration("timeout", 30*time.Second, "time allowed for the API calls")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm preflight --project P [--spec FILE] [--universe-domain D] [--project-number N] [--agent-domain A]\n\n"+
			"Checks flexslurm's prerequisite in the project's IAM policy: the Google APIs service\n"+
			"agent (PROJECT_NUMBER@cloudservices.gserviceaccount.com; the domain differs per\n"+
			"universe) must hold roles/editor (or roles/owner), or both\n"+
			"roles/compute.instanceAdmin.v1 and roles/iam.serviceAccountUser. Conditional\n"+
			"bindings do not count. Prints what is missing and the gcloud commands that grant it.\n"+
			"The caller needs resourcemanager.projects.get and .getIamPolicy on the project.\n\n"+
			"With --spec it also reads the project's Compute quotas (regions.get for each pool's\n"+
			"region, projects.get; needs compute.regions.get and compute.projects.get) and says\n"+
			"where the spec's Flex-Start pools at max_node_count could exceed what is free: MIGs\n"+
			"and resize requests (one per node at worst), preemptible GPUs and vCPUs, instance\n"+
			"templates. A quota that could be exceeded is a WARNING; one below a single node is SHORT.\n\n"+
			"With FLEXSLURM_COMPUTE_ENDPOINT set, the quotas are read from that Compute\n"+
			"endpoint (the simulator of flexslurm local or compute-sim).\n\n"+
			"Exit status: 0 met, 1 a role is missing, 2 bad usage, 3 could not check (with\n"+
			"--spec the quotas are still checked and printed), 4 (--spec) a quota is SHORT\n"+
			"and nothing else is wrong (a missing role or a check that could not tell wins).")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return preflightUsage
	}
	if o.Project == "" {
		fmt.Fprintf(stderr, "flexslurm preflight: no project: pass --project or set %s\n", config.EnvProject)
		return preflightUsage
	}
	var pools []preflight.QuotaPool
	if *specPath != "" {
		cl, err := spec.Load(*specPath)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm preflight: %v\n", err)
			return preflightUsage
		}
		if pools = quotaPools(cl); len(pools) == 0 {
			fmt.Fprintf(stderr, "flexslurm preflight: %s has no FLEX_START pool: no quota to check\n", *specPath)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// The IAM check; when it cannot tell (no permission to read the
	// policy, no network) and a spec is given, the quota check still runs,
	// and the exit status says the IAM check could not tell.
	code := preflightOK
	c, err := preflight.NewClient(ctx, o.Universe, extra...)
	if err == nil {
		defer c.Close()
		var r *preflight.Report
		r, err = preflight.Check(ctx, c, o)
		switch {
		case errors.Is(err, preflight.ErrInvalid):
			fmt.Fprintf(stderr, "flexslurm preflight: %v\n", err)
			return preflightUsage
		case err == nil:
			if err := r.Write(stdout); err != nil {
				fmt.Fprintf(stderr, "flexslurm preflight: %v\n", err)
				return preflightCantTell
			}
			if !r.OK() {
				code = preflightMissing
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm preflight: could not check: %v\n", err)
		code = preflightCantTell
	}
	if len(pools) == 0 {
		return code
	}
	var copts []option.ClientOption
	if o.Universe != "" {
		copts = append(copts, option.WithUniverseDomain(o.Universe))
	}
	if ep := strings.TrimSpace(os.Getenv(config.EnvComputeEndpoint)); ep != "" && len(computeOpts) == 0 {
		// The Compute simulator (flexslurm compute-sim, flexslurm local),
		// as teardown takes it.
		copts = append(copts, option.WithEndpoint(ep), option.WithoutAuthentication())
	}
	qc, err := gce.NewQuotaClient(ctx, o.Project, append(copts, computeOpts...)...)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm preflight: %v\n", err)
		return preflightCantTell
	}
	defer qc.Close()
	qr, err := preflight.CheckQuotas(ctx, gceQuotas{qc}, pools)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm preflight: could not check the quotas: %v\n", err)
		return preflightCantTell
	}
	fmt.Fprintln(stdout)
	if err := qr.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "flexslurm preflight: %v\n", err)
		return preflightCantTell
	}
	if code == preflightOK && qr.Worst() == preflight.QuotaShort {
		code = preflightQuota
	}
	return code
}

// quotaPools describes the spec's FLEX_START pools for the quota check:
// region, maximum size, and each VM's vCPUs and GPUs from the machine
// catalog (bundled GPUs, or machine_spec's attached accelerators).
func quotaPools(cl *spec.Cluster) []preflight.QuotaPool {
	var out []preflight.QuotaPool
	for _, p := range cl.NodePools {
		if p.ProvisioningModel != spec.ProvisioningFlexStart {
			continue
		}
		qp := preflight.QuotaPool{ID: p.ID, Region: cl.Region, MaxNodes: p.MaxNodeCount}
		if i := strings.LastIndexByte(p.Zone, '-'); i > 0 {
			qp.Region = p.Zone[:i]
		}
		if m, ok := spec.LookupMachine(p.MachineSpec.MachineType); ok {
			qp.VCPUs = m.VCPUs
			if m.Bundled() {
				qp.GPUs, qp.Accelerator = m.GPUs, m.Accelerator
			}
		}
		if qp.GPUs == 0 && p.MachineSpec.AcceleratorType != "" {
			qp.GPUs, qp.Accelerator = p.MachineSpec.AcceleratorCount, spec.AcceleratorName(p.MachineSpec.AcceleratorType)
		}
		out = append(out, qp)
	}
	return out
}

// gceQuotas reads quotas for preflight through shared/gce.
type gceQuotas struct{ c *gce.QuotaClient }

func (g gceQuotas) RegionQuotas(ctx context.Context, region string) (preflight.QuotaSet, error) {
	s, err := g.c.RegionQuotas(ctx, region)
	return quotaSet(s), err
}

func (g gceQuotas) ProjectQuotas(ctx context.Context) (preflight.QuotaSet, error) {
	s, err := g.c.ProjectQuotas(ctx)
	return quotaSet(s), err
}

func quotaSet(s gce.QuotaSet) preflight.QuotaSet {
	out := preflight.QuotaSet{Warning: s.Warning}
	for _, q := range s.Quotas {
		out.Quotas = append(out.Quotas, preflight.Quota{Metric: q.Metric, Limit: q.Limit, Usage: q.Usage})
	}
	return out
}
