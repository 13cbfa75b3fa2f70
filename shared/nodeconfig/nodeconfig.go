// Package nodeconfig is the contract between the instance template that
// flexslurm builds for a node pool and the bootstrap that runs on each of
// its VMs (`flexslurm node boot`): the instance metadata attribute that
// carries a node's settings, and those settings.
//
// A VM learns everything else from the metadata server: its name
// ("<node>-g<generation>", shared/naming), zone, project and service
// account.
//
// This package imports only the standard library and shared/inputs.
package nodeconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/flexslurm/flexslurm/shared/inputs"
)

// Instance metadata attribute keys
// (computeMetadata/v1/instance/attributes/KEY on the metadata server).
const (
	// AttrConfig holds the node's Config as JSON.
	AttrConfig = "flexslurm-node"
	// AttrStartupScript is Compute Engine's own startup-script key: the
	// guest environment runs it as root at every boot
	// (https://cloud.google.com/compute/docs/instances/startup-scripts/linux).
	AttrStartupScript = "startup-script"
	// AttrVersion holds the flexslurm version (shared/version.Info.ID) of
	// the functions that built the instance template; absent when their
	// build recorded none. A node's bootstrap compares its own with it.
	AttrVersion = "flexslurm-version"
)

// Version is the Config version this package writes and reads.
const Version = 1

// Mount types.
const (
	// MountNFS mounts an NFS export ("10.0.0.2:/home", e.g. a Filestore
	// instance's IP address and file share).
	MountNFS = "nfs"
	// MountBind bind-mounts a local directory: the local system's stand-in
	// for a Filestore instance.
	MountBind = "bind"
)

// Mount is where a node mounts the cluster's home directories.
type Mount struct {
	// Storage is the spec's orchestrator_spec.slurm_spec.home_directory_storage
	// ("projects/P/locations/ZONE/instances/NAME"), kept for the record.
	Storage string `json:"storage,omitempty"`
	// Type is MountNFS or MountBind.
	Type string `json:"type"`
	// Source is "HOST:/EXPORT" for NFS, an absolute directory for bind.
	Source string `json:"source"`
	// Dir is the absolute mount point, "/home" for a cluster's homes.
	Dir string `json:"dir"`
}

// Topics are the Pub/Sub topic ids the node's hooks publish to.
type Topics struct {
	Jobs   string `json:"jobs"`
	Health string `json:"health"`
}

// Config is what one node pool's VMs need to join the cluster. It is the
// JSON value of the AttrConfig metadata attribute; unknown fields are
// rejected, so a newer writer fails loudly on an older node.
type Config struct {
	// Version is the format version (Version).
	Version int `json:"version"`
	// Cluster and Pool are the spec's cluster id and node pool id.
	Cluster string `json:"cluster"`
	Pool    string `json:"pool"`
	// Project is the project of the Pub/Sub topics and of the secret.
	Project string `json:"project"`
	// ConfServer is slurmd's --conf-server (configless mode): the
	// controller as "host[:port]", several separated by commas.
	ConfServer string `json:"conf_server"`
	// MungeKeySecret is the Secret Manager secret version holding the munge
	// key: "projects/P/secrets/S/versions/V" (V a number or "latest").
	MungeKeySecret string `json:"munge_key_secret"`
	// Home is where the cluster's home directories are mounted.
	Home Mount `json:"home"`
	// GPUCount is the number of GPUs the pool's machine type has (0 for
	// none); the node's health check fails when fewer are visible.
	GPUCount int `json:"gpu_count"`
	// Topics are the topics the node's hooks publish to.
	Topics Topics `json:"topics"`
}

var secretRE = regexp.MustCompile(`^projects/([^/]+)/secrets/[A-Za-z0-9_-]{1,255}/versions/(latest|[1-9][0-9]*)$`)

// Validate reports every problem with c, each naming its JSON field and
// quoting the value. Every string here reaches a path of a Google API call
// (project, secret, topics), slurmd's argument list (conf_server) or
// mount's (home): each is held to a strict pattern of shared/inputs
// (docs/security.md, "Inputs and where they go").
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	check := func(field, v string, r inputs.Rule) {
		if !r.Match(v) {
			bad(field, "%q: want %s", v, r.Allowed)
		}
	}
	if c.Version != Version {
		bad("version", "%d: want %d", c.Version, Version)
	}
	check("cluster", c.Cluster, inputs.ClusterID)
	check("pool", c.Pool, inputs.PoolID)
	check("project", c.Project, inputs.ProjectRef)
	check("conf_server", c.ConfServer, inputs.ConfServer)
	if m := secretRE.FindStringSubmatch(c.MungeKeySecret); m == nil || !inputs.ProjectRef.Match(m[1]) {
		bad("munge_key_secret", "%q: want projects/P/secrets/S/versions/V", c.MungeKeySecret)
	}
	if c.Home.Storage != "" {
		check("home.storage", c.Home.Storage, inputs.HomeStorage)
	}
	switch c.Home.Type {
	case MountNFS:
		// mount's source: no leading "-" (an option), no "," (more
		// options), no blank or control character.
		check("home.source", c.Home.Source, inputs.NFSSource)
	case MountBind:
		if !mountPath(c.Home.Source) {
			bad("home.source", "%q: want an absolute directory for a bind mount, without control characters or \",\"", c.Home.Source)
		}
	default:
		bad("home.type", "%q: want %q or %q", c.Home.Type, MountNFS, MountBind)
	}
	if !mountPath(c.Home.Dir) || c.Home.Dir == "/" {
		bad("home.dir", "%q: want an absolute mount point other than /, without control characters or \",\"", c.Home.Dir)
	}
	if c.GPUCount < 0 || c.GPUCount > 16 {
		bad("gpu_count", "%d: want 0–16", c.GPUCount)
	}
	check("topics.jobs", c.Topics.Jobs, inputs.TopicID)
	check("topics.health", c.Topics.Health, inputs.TopicID)
	return errors.Join(errs...)
}

// mountPath reports whether p is an absolute, clean path that mount can
// take as one argument: no control character and no ",".
func mountPath(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && !inputs.HasControl(p) && !strings.Contains(p, ",")
}

// Encode returns c as the value of the AttrConfig attribute, after
// validating it.
func (c Config) Encode() (string, error) {
	if err := c.Validate(); err != nil {
		return "", fmt.Errorf("node config of pool %s: %w", c.Pool, err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Decode parses and validates the value of the AttrConfig attribute.
func Decode(s string) (Config, error) {
	var c Config
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("metadata attribute %s: %w", AttrConfig, err)
	}
	if dec.More() {
		return Config{}, fmt.Errorf("metadata attribute %s: trailing data after the JSON object", AttrConfig)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("metadata attribute %s: %w", AttrConfig, err)
	}
	return c, nil
}
