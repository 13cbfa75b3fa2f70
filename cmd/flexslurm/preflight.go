package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/preflight"
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
)

func cmdPreflight(args []string, stdout, stderr io.Writer) int {
	return runPreflight(args, stdout, stderr)
}

// runPreflight is cmdPreflight with extra Resource Manager client options
// (tests point it at a fake server).
func runPreflight(args []string, stdout, stderr io.Writer, extra ...option.ClientOption) int {
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	var o preflight.Options
	fs.StringVar(&o.Project, "project", os.Getenv(config.EnvProject), "project id (default $"+config.EnvProject+"); S3NS ids carry the s3ns: prefix")
	fs.StringVar(&o.Universe, "universe-domain", os.Getenv(config.EnvUniverseDomain), "universe domain, e.g. s3nsapis.fr (default $"+config.EnvUniverseDomain+", else googleapis.com)")
	fs.StringVar(&o.ProjectNumber, "project-number", "", "project number; skips reading the project (resourcemanager.projects.get)")
	fs.StringVar(&o.AgentDomain, "agent-domain", "", "domain of the service agent's address after the @ (default: found in the policy, else cloudservices.gserviceaccount.com)")
	timeout := fs.Duration("timeout", 30*time.Second, "time allowed for the API calls")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm preflight --project P [--universe-domain D] [--project-number N] [--agent-domain A]\n\n"+
			"Checks the seed's prerequisite in the project's IAM policy: the Google APIs service\n"+
			"agent (PROJECT_NUMBER@cloudservices.gserviceaccount.com; the domain differs per\n"+
			"universe) must hold roles/editor (or roles/owner), or both\n"+
			"roles/compute.instanceAdmin.v1 and roles/iam.serviceAccountUser. Conditional\n"+
			"bindings do not count. Prints what is missing and the gcloud commands that grant it.\n"+
			"The caller needs resourcemanager.projects.get and .getIamPolicy on the project.\n\n"+
			"Exit status: 0 met, 1 a role is missing, 2 bad usage, 3 could not check.")
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
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := preflight.NewClient(ctx, o.Universe, extra...)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm preflight: %v\n", err)
		return preflightCantTell
	}
	defer c.Close()
	r, err := preflight.Check(ctx, c, o)
	switch {
	case errors.Is(err, preflight.ErrInvalid):
		fmt.Fprintf(stderr, "flexslurm preflight: %v\n", err)
		return preflightUsage
	case err != nil:
		fmt.Fprintf(stderr, "flexslurm preflight: could not check: %v\n", err)
		return preflightCantTell
	}
	if err := r.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "flexslurm preflight: %v\n", err)
		return preflightCantTell
	}
	if !r.OK() {
		return preflightMissing
	}
	return preflightOK
}
