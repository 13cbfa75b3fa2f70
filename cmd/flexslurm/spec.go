package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/wire"
)

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm validate FILE\n\nParses a managed-Slurm cluster_config.json, applies the defaults and prints the\neffective spec. Every problem is listed by JSON path; the exit status is 1 when\nthere is any.")
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "flexslurm validate: want one FILE, got %d argument(s) %q\n", fs.NArg(), fs.Args())
		fs.Usage()
		return 2
	}
	c, err := spec.Load(fs.Arg(0))
	if err != nil {
		var ve *spec.ValidationError
		if errors.As(err, &ve) {
			fmt.Fprintf(stderr, "%s: %d problem(s):\n%s\n", fs.Arg(0), len(ve.Problems), joinLines(ve.Error()))
		} else {
			fmt.Fprintf(stderr, "flexslurm validate: %v\n", err)
		}
		return 1
	}
	out, err := c.EffectiveJSON()
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm validate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}

// ClusterMessage builds the cluster.applied payload of a validated spec and
// its resolved node settings.
func ClusterMessage(c *spec.Cluster, node nodeconfig.Settings, now time.Time) ([]byte, error) {
	eff, err := c.EffectiveJSON()
	if err != nil {
		return nil, err
	}
	return json.Marshal(event.Cluster{
		Header:    event.Header{Version: event.SchemaVersion, Type: event.TypeClusterApply, Cluster: c.ID},
		Spec:      eff,
		Node:      &node,
		AppliedAt: now.UTC(),
	})
}

// LoadNodeSettings reads a node settings file (JSON, e.g. `terraform output
// -json node_settings`); unknown fields are errors.
func LoadNodeSettings(path string) (nodeconfig.Settings, error) {
	var s nodeconfig.Settings
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("node settings: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("node settings %s: %w", path, err)
	}
	if err := s.Validate(false); err != nil {
		return s, fmt.Errorf("node settings %s: %w", path, err)
	}
	return s, nil
}

func cmdApply(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	project := fs.String("project", os.Getenv(config.EnvProject), "Google Cloud project of the Pub/Sub topic and the node pools (default $GOOGLE_CLOUD_PROJECT)")
	topic := fs.String("topic", config.TopicClusterSpec, "topic the ScaleUp function reads cluster specs from")
	nodeSettings := fs.String("node-settings", "", "node settings JSON file (required without --api; e.g. the output of terraform output -json node_settings)")
	slurmConf := fs.String("slurm-conf", "", "Slurm's slurm.conf (a copy of the controller's): refuse a spec it cannot serve, saying what to change")
	force := fs.Bool("force", false, "with --slurm-conf: publish even when Slurm's configuration cannot serve the spec (after printing what to change)")
	apiURL := fs.String("api", os.Getenv(EnvAPIURL), "the API function's URL (default $"+EnvAPIURL+"; terraform output api_url): create or update the cluster through it")
	wait := fs.Duration("wait", 5*time.Minute, "with --api: how long to wait for the operation to be done (0: do not wait)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm apply --api URL [--wait D] [--slurm-conf FILE [--force]] SPEC\n       flexslurm apply [--project P] [--topic T] [--slurm-conf FILE [--force]] --node-settings FILE SPEC\n\nWith --api (or $"+EnvAPIURL+"), creates the cluster through the API function\n(POST modelDevelopmentClusters?modelDevelopmentClusterId=ID, the spec file's\nbytes as the body) or, when it exists, updates it (PATCH, the whole resource),\nand waits for the operation: the API applies the node settings of its\ndeployment (docs/api.md). Deployed, it sends an identity token for the URL\n(the invoker role is required); with user credentials set\n"+EnvAPIToken+"=$(gcloud auth print-identity-token).\n\nWithout --api (a deployment without the API function), it validates the\ncluster spec, resolves the node settings' image families (and the\npools' node_image) to images through the Compute API, and publishes both as a\ncluster.applied event: the ScaleUp function creates the pools' templates and\nMIGs, brings static pools to min_node_count and releases surplus nodes.\nWith --slurm-conf, a spec that\nSlurm's configuration cannot serve (nodes, GPUs or partition limits; see\n`flexslurm slurm-conf --check`) is refused with the lines to change.\nHonours PUBSUB_EMULATOR_HOST, FLEXSLURM_COMPUTE_ENDPOINT and\nGOOGLE_CLOUD_UNIVERSE_DOMAIN.")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "flexslurm apply: want one SPEC, got %d argument(s) %q\n", fs.NArg(), fs.Args())
		fs.Usage()
		return 2
	}
	if *apiURL == "" && *nodeSettings == "" {
		fmt.Fprintln(stderr, "flexslurm apply: --node-settings is required (or --api URL: the API applies its deployment's node settings)")
		fs.Usage()
		return 2
	}
	if *apiURL != "" && *nodeSettings != "" {
		fmt.Fprintln(stderr, "flexslurm apply: --node-settings with --api: the API applies its deployment's node settings (FLEXSLURM_NODE_SETTINGS); drop one of them")
		return 2
	}
	if *apiURL == "" && *project == "" {
		fmt.Fprintln(stderr, "flexslurm apply: no project: pass --project or set GOOGLE_CLOUD_PROJECT")
		return 2
	}
	c, err := spec.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	if *slurmConf == "" {
		fmt.Fprintln(stderr, "flexslurm apply: not compared with Slurm's configuration (pass --slurm-conf FILE): "+
			"a pool resized beyond Slurm's NodeName lines gets no jobs until slurm.conf changes (`flexslurm slurm-conf`); "+
			"the agent beside slurmctld compares the spec it runs with at every snapshot and logs what to change, which `flexslurm status` shows")
	} else {
		ds, err := specDivergences(c, *slurmConf)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm apply: --slurm-conf: %v\n", err)
			return 1
		}
		if len(ds) > 0 {
			printDivergences(stderr, *slurmConf, ds)
			if !*force {
				fmt.Fprintln(stderr, "flexslurm apply: refused: change slurm.conf first (or pass --force to publish anyway)")
				return 1
			}
		}
	}
	if *apiURL != "" {
		body, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
			return 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), *wait+2*time.Minute)
		defer cancel()
		ac, err := newAPIClient(ctx, *apiURL)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
			return 2
		}
		return applyViaAPI(ctx, ac, c, body, *wait, stdout, stderr)
	}
	settings, err := LoadNodeSettings(*nodeSettings)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	if err := binaryOnImages(c, settings); err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: node settings %s: %v\n", *nodeSettings, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := config.FromEnv(func(k string) string {
		if k == config.EnvProject {
			return *project
		}
		return os.Getenv(k)
	})
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	cc, err := gce.New(ctx, *project, wire.ClientOptions(cfg, true)...)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	defer cc.Close()
	node, err := instancetemplate.Resolve(ctx, c, settings, cc.ResolveImage)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", joinLines(err.Error()))
		return 1
	}
	data, err := ClusterMessage(c, node, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	ps, err := pubsub.New(ctx, *project)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	defer ps.Close()
	id, err := ps.Publish(ctx, *topic, data, map[string]string{"cluster": c.ID})
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: publishing to topic %q of project %q (projects/%s/topics/%s): %v\n"+
			"  check --project (or GOOGLE_CLOUD_PROJECT) and --topic: the deployment's project, where Terraform created the topic\n",
			*topic, *project, *project, *topic, err)
		return 1
	}
	fmt.Fprintf(stdout, "cluster %s applied (default node image %s): published message %s to %s\n", c.ID, node.Image, id, *topic)
	return 0
}

// imagesWithoutFlexslurm are image projects whose images are known not to
// carry the flexslurm binary: Cluster Toolkit's public slurm-gcp images.
var imagesWithoutFlexslurm = []string{"schedmd-slurm-public"}

// binaryOnImages refuses node settings under which VMs would boot an image
// known to lack /usr/local/sbin/flexslurm with no binary_url to install it
// from: such VMs would bill and never join Slurm.
func binaryOnImages(c *spec.Cluster, s nodeconfig.Settings) error {
	if s.BinaryURL != "" {
		return nil
	}
	refs := []string{s.Image}
	for _, p := range c.FlexPools() {
		if p.NodeImage != "" {
			refs = append(refs, p.NodeImage)
		}
	}
	for _, ref := range refs {
		project, _, _, err := nodeconfig.ParseImage(ref)
		if err == nil && slices.Contains(imagesWithoutFlexslurm, project) {
			return fmt.Errorf("binary_url: empty, and image %s does not carry %s, so its VMs would never join Slurm: "+
				"set binary_url (Terraform: node_binary_url) to a gs:// copy of the flexslurm binary, or boot an image that carries it", ref, nodeconfig.BinaryPath)
		}
	}
	return nil
}
