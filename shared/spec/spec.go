// Package spec owns the cluster specification that flexslurm works from: the
// managed Slurm cluster_config.json (a Gemini Enterprise Agent Platform /
// Vertex AI modelDevelopmentClusters resource, proto-style snake_case field
// names) parsed, validated and completed with the API's defaults.
//
// Parse returns the effective spec: every default the managed Slurm API would
// apply is filled in (provisioning model, flex-start maximum duration, boot
// disk), so callers never re-derive them. Invalid input is rejected with a
// *ValidationError that lists every problem found, each at its JSON path.
//
// The rules come from the managed Slurm API (modelDevelopmentClusters v1beta1,
// mirrored in the Terraform definition
// mmv1/products/vertexai/ModelDevelopmentCluster.yaml in
// GoogleCloudPlatform/magic-modules) and from the "Using Flex-start VMs with
// Slurm clusters" guide: https://github.com/GoogleCloudPlatform/magic-modules/blob/main/mmv1/products/vertexai/ModelDevelopmentCluster.yaml,
// https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/create-cluster,
// https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/using-flex-start-vms-with-slurm-clusters.
//
// Every string that reaches a configuration file, the path of a Google API
// call, a resource name or label is held to a strict pattern of
// shared/inputs (docs/security.md, "Inputs and where they go").
//
// The package does no I/O apart from Load reading one file, and imports
// nothing from the rest of flexslurm but shared/inputs.
package spec

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// Flex-start run-duration bounds. The managed Slurm API accepts a node pool's
// flex_start_max_duration from 30 s to 7 days and applies 7 days when it is
// omitted (https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/using-flex-start-vms-with-slurm-clusters). Compute Engine itself
// accepts maxRunDuration and a resize request's requestedRunDuration only from
// 600 s to 604800 s (https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig), see ComputeRunDuration.
const (
	// MinFlexStartMaxDuration is the shortest flex_start_max_duration the
	// managed Slurm API accepts: 30 seconds.
	MinFlexStartMaxDuration = 30 * time.Second
	// MaxFlexStartMaxDuration is the longest flex_start_max_duration the
	// managed Slurm API accepts: 7 days (604800 seconds).
	MaxFlexStartMaxDuration = 604800 * time.Second
	// DefaultFlexStartMaxDuration is applied to a FLEX_START pool that omits
	// flex_start_max_duration: 7 days (604800 seconds).
	DefaultFlexStartMaxDuration = 604800 * time.Second
	// ComputeMinRunDuration is Compute Engine's floor for an instance's
	// scheduling.maxRunDuration and a MIG resize request's
	// requestedRunDuration: 600 seconds (the API accepts 600–604800 s).
	ComputeMinRunDuration = 600 * time.Second
)

// DefaultBootDiskSizeGB is the boot disk size, in GB, that the managed Slurm
// API applies when boot_disk.boot_disk_size_gb is omitted
// (https://github.com/GoogleCloudPlatform/magic-modules/blob/main/mmv1/products/vertexai/ModelDevelopmentCluster.yaml).
const DefaultBootDiskSizeGB = 100

// MaxSpecBytes is the largest cluster spec, in bytes, that Parse and Load
// accept: 1 MiB. Real specs are a few KiB; the bound keeps a malformed or
// hostile input from costing unbounded memory.
const MaxSpecBytes = 1 << 20

// ProvisioningModel is a node pool's provisioning_model, spelled as in the
// managed Slurm API.
type ProvisioningModel string

// The provisioning models the managed Slurm API accepts
// (https://github.com/GoogleCloudPlatform/magic-modules/blob/main/mmv1/products/vertexai/ModelDevelopmentCluster.yaml).
const (
	// ProvisioningOnDemand is standard on-demand capacity; it is the
	// default for a pool without accelerators.
	ProvisioningOnDemand ProvisioningModel = "ON_DEMAND"
	// ProvisioningReservation draws capacity from a reservation.
	ProvisioningReservation ProvisioningModel = "RESERVATION"
	// ProvisioningSpot is preemptible Spot capacity.
	ProvisioningSpot ProvisioningModel = "SPOT"
	// ProvisioningFlexStart is Flex-Start capacity: it may queue before it
	// is granted, and each VM ends at the pool's maximum run duration.
	ProvisioningFlexStart ProvisioningModel = "FLEX_START"
)

// Cluster is the effective spec of one managed Slurm cluster.
type Cluster struct {
	// ID is the cluster id: the last segment of Name when it is non-empty,
	// otherwise DisplayName (examples/cluster_config.json leaves the segment empty because the
	// API takes the id as a create-time parameter). It matches
	// ^[a-z][a-z0-9]{0,9}$, the rule for clusters with a slurm_spec
	// (https://github.com/GoogleCloudPlatform/magic-modules/blob/main/mmv1/products/vertexai/ModelDevelopmentCluster.yaml).
	ID string
	// Project is the project id taken from Name (S3NS ids keep their
	// "s3ns:" prefix).
	Project string
	// Region is the location taken from Name, e.g. "us-central1".
	Region string
	// DisplayName is display_name as given; at most 128 characters. Empty
	// when omitted, which is allowed only when Name carries the id.
	DisplayName string
	// Name is name exactly as given:
	// projects/<project>/locations/<region>/modelDevelopmentClusters/[<id>].
	Name string
	// Network is the cluster's VPC.
	Network Network
	// NodePools lists the node pools in spec order; ids are unique.
	NodePools []NodePool
	// Slurm is orchestrator_spec.slurm_spec.
	Slurm SlurmSpec
}

// Network is the cluster's network spec.
type Network struct {
	// Network is the VPC, e.g. "projects/P/global/networks/default";
	// required.
	Network string
	// Subnetwork is the subnetwork, e.g.
	// "projects/P/regions/R/subnetworks/default"; empty lets the API choose.
	Subnetwork string
}

// NodePool is the effective spec of one node pool.
type NodePool struct {
	// ID is the pool id: 1–16 characters matching
	// ^[a-z]([a-z0-9-]{0,14}[a-z0-9])?$. The bound is flexslurm's, not the
	// API's: Slurm node names and Compute instance names are built from the
	// cluster id (at most 10 characters), the pool id and a node index, and
	// must stay within Compute's 63-character name limit with room for
	// separators and suffixes.
	ID string
	// MachineSpec is the VM shape.
	MachineSpec MachineSpec
	// ProvisioningModel is the effective provisioning model. An omitted
	// provisioning_model (or PROVISIONING_MODEL_UNSPECIFIED) means
	// ON_DEMAND for a pool without accelerators. For a pool with
	// accelerators the API defaults to RESERVATION only when
	// machine_spec.reservation_affinity is set and rejects the pool
	// otherwise (https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/create-cluster); reservation_affinity is not modelled here, so
	// such a pool must set provisioning_model explicitly.
	ProvisioningModel ProvisioningModel
	// FlexStartMaxDuration is the effective maximum run duration of each VM
	// of a FLEX_START pool: flex_start_max_duration, or
	// DefaultFlexStartMaxDuration when omitted. Whole seconds between
	// MinFlexStartMaxDuration and MaxFlexStartMaxDuration. Zero for pools
	// that are not FLEX_START.
	FlexStartMaxDuration time.Duration
	// MinNodeCount is scaling_spec.min_node_count: the number of static
	// nodes, kept up whether or not jobs are waiting. 0 ≤ MinNodeCount ≤
	// MaxNodeCount.
	MinNodeCount int
	// MaxNodeCount is scaling_spec.max_node_count: the pool's size limit;
	// the slots above MinNodeCount are dynamic nodes.
	MaxNodeCount int
	// Zone is the pool's zone, e.g. "us-central1-a"; it lies in the
	// cluster's region.
	Zone string
	// EnablePublicIPs reports whether the pool's VMs get external IPs.
	EnablePublicIPs bool
	// BootDisk is the effective boot disk.
	BootDisk BootDisk
	// NodeImage is node_image: the pool's boot image, as an image
	// ("projects/P/global/images/NAME") or an image family
	// ("projects/P/global/images/family/F"); empty for the deployment's
	// default image. `flexslurm apply` resolves a family to an image.
	NodeImage string
	// Ext holds the pool's settings that the managed Slurm API has no
	// field for, read from the pool's optional "flexslurm" object
	// (docs/extensions.md). Its zero value is a pool as the managed spec
	// describes it.
	Ext PoolExtension
}

// MachineSpec is a node pool's machine_spec.
type MachineSpec struct {
	// MachineType is the Compute machine type, e.g. "a3-ultragpu-8g".
	MachineType string
	// AcceleratorType is the GPU type, e.g. "NVIDIA_H200_141GB"; empty for
	// CPU pools.
	AcceleratorType string
	// AcceleratorCount is the number of accelerators per VM; ≥ 1 when
	// AcceleratorType is set.
	AcceleratorCount int
}

// BootDisk is a node pool's effective boot_disk.
type BootDisk struct {
	// Type is "pd-ssd", "pd-standard" or "hyperdisk-balanced". When omitted
	// the API picks "hyperdisk-balanced" for A3 Ultra (a3-ultragpu-*)
	// machines and "pd-ssd" otherwise (magic-modules
	// ModelDevelopmentCluster.yaml, bootDiskType).
	Type string
	// SizeGB is the disk size in GB, ≥ 1; DefaultBootDiskSizeGB when
	// omitted.
	SizeGB int
}

// SlurmSpec is orchestrator_spec.slurm_spec.
type SlurmSpec struct {
	// HomeDirectoryStorage is the full name of the Filestore (or Lustre)
	// instance mounted as /home, e.g.
	// "projects/P/locations/us-central1-a/instances/home".
	HomeDirectoryStorage string
	// Partitions lists the Slurm partitions in spec order; ids are unique
	// and every node pool id they name exists.
	Partitions []Partition
	// LoginNodePoolID names the pool that runs the login node; it exists
	// and its MinNodeCount equals its MaxNodeCount (https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/create-cluster).
	LoginNodePoolID string
	// DefaultPartitionID names the default partition; empty means the API
	// uses the first partition.
	DefaultPartitionID string
}

// Partition is one Slurm partition.
type Partition struct {
	// ID is the partition name.
	ID string
	// NodePoolIDs names the node pools whose nodes form the partition; at
	// least one.
	NodePoolIDs []string
}

// IsFlexStart reports whether the pool's VMs are Flex-Start VMs.
func (p NodePool) IsFlexStart() bool {
	return p.ProvisioningModel == ProvisioningFlexStart
}

// ComputeRunDuration is the run duration flexslurm requests from Compute
// Engine for a VM of this pool (scheduling.maxRunDuration, or a resize
// request's requestedRunDuration): FlexStartMaxDuration raised to
// ComputeMinRunDuration, because Compute rejects anything below 600 s while
// the managed Slurm API allows 30 s. A pool configured for 30–599 s is
// therefore requested at 600 s, and flexslurm ends each node itself when the
// configured FlexStartMaxDuration has elapsed. It returns 0 for a pool that
// is not FLEX_START, whose VMs have no run-duration limit.
func (p NodePool) ComputeRunDuration() time.Duration {
	if !p.IsFlexStart() {
		return 0
	}
	return max(p.FlexStartMaxDuration, ComputeMinRunDuration)
}

// Pool returns the node pool with the given id, pointing into c.NodePools.
func (c *Cluster) Pool(id string) (*NodePool, bool) {
	for i := range c.NodePools {
		if c.NodePools[i].ID == id {
			return &c.NodePools[i], true
		}
	}
	return nil, false
}

// FlexPools returns, in spec order, the pools flexslurm manages: those whose
// provisioning model is FLEX_START, except the login pool.
func (c *Cluster) FlexPools() []NodePool {
	var out []NodePool
	for _, p := range c.NodePools {
		if p.IsFlexStart() && p.ID != c.Slurm.LoginNodePoolID {
			out = append(out, p)
		}
	}
	return out
}

// PartitionsForPool returns, in spec order, the ids of the partitions that
// include the node pool id; nil when none does.
func (c *Cluster) PartitionsForPool(id string) []string {
	var out []string
	for _, part := range c.Slurm.Partitions {
		if slices.Contains(part.NodePoolIDs, id) {
			out = append(out, part.ID)
		}
	}
	return out
}

// Load reads and parses the cluster spec at path. Read failures are wrapped
// as "reading cluster spec <path>: ..."; an invalid spec yields an error
// wrapping the *ValidationError from Parse. Files larger than MaxSpecBytes
// are rejected without being read whole.
func Load(path string) (*Cluster, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading cluster spec %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading cluster spec %s: %w", path, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parsing cluster spec %s: %w", path, err)
	}
	return c, nil
}

// Parse parses and validates a cluster_config.json document and returns its
// effective spec. Any failure is a *ValidationError listing every problem
// found, in document order: input over MaxSpecBytes, malformed JSON,
// unknown, duplicate, unsupported or missing fields, unreplaced placeholders
// such as "<project-id>", and every rule documented on the Cluster and
// NodePool fields.
func Parse(data []byte) (*Cluster, error) {
	if len(data) > MaxSpecBytes {
		return nil, &ValidationError{Problems: []Problem{{
			Message: fmt.Sprintf("cluster spec is larger than the %d-byte limit (MaxSpecBytes)", MaxSpecBytes),
		}}}
	}
	root, perr := decodeTree(data)
	if perr != nil {
		return nil, &ValidationError{Problems: []Problem{*perr}}
	}
	w := &walker{}
	c := w.cluster(root)
	if err := w.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Problem is one reason a cluster spec was rejected.
type Problem struct {
	// Path locates the offending value as a JSON path, e.g.
	// "node_pools[1].flex_start_max_duration"; a missing field's path is
	// where it belongs. Empty for problems with the document as a whole.
	Path string
	// Message says what is wrong and names the offending value.
	Message string
}

// String renders the problem as "path: message", or just the message when
// Path is empty.
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError is the error Parse returns for an invalid spec. It lists
// every problem found, never only the first.
type ValidationError struct {
	// Problems is in document order: by where the offending value appears,
	// a missing field being placed at the end of the object it belongs to.
	// Never empty.
	Problems []Problem
}

// Error prints one problem per line as "path: message".
func (e *ValidationError) Error() string {
	var b []byte
	for i, p := range e.Problems {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, p.String()...)
	}
	return string(b)
}
