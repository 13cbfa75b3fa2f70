package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flexslurm validate FILE\n\nParses a managed-Slurm cluster_config.json, applies the defaults and prints the\neffective spec. Every problem is listed by JSON path; the exit status is 1 when\nthere is any.")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
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

// ClusterMessage builds the cluster.applied payload of a validated spec.
func ClusterMessage(c *spec.Cluster, now time.Time) ([]byte, error) {
	eff, err := c.EffectiveJSON()
	if err != nil {
		return nil, err
	}
	return json.Marshal(event.Cluster{
		Header:    event.Header{Version: event.SchemaVersion, Type: event.TypeClusterApply, Cluster: c.ID},
		Spec:      eff,
		AppliedAt: now.UTC(),
	})
}

func cmdApply(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	fs.SetOutput(stderr)
	project := fs.String("project", os.Getenv(config.EnvProject), "Google Cloud project of the Pub/Sub topic (default $GOOGLE_CLOUD_PROJECT)")
	topic := fs.String("topic", config.TopicClusterSpec, "topic the ScaleUp function reads cluster specs from")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flexslurm apply [--project P] [--topic T] FILE\n\nValidates the cluster spec and publishes it as a cluster.applied event: the\nScaleUp function brings static pools to min_node_count and releases surplus\nnodes. Honours PUBSUB_EMULATOR_HOST.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	if *project == "" {
		fmt.Fprintln(stderr, "flexslurm apply: no project: pass --project or set GOOGLE_CLOUD_PROJECT")
		return 2
	}
	c, err := spec.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	data, err := ClusterMessage(c, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps, err := pubsub.New(ctx, *project)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	defer ps.Close()
	id, err := ps.Publish(ctx, *topic, data, map[string]string{"cluster": c.ID})
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: publishing to %s: %v\n", *topic, err)
		return 1
	}
	fmt.Fprintf(stdout, "cluster %s applied: published message %s to %s\n", c.ID, id, *topic)
	return 0
}
