package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// The wire shapes of the effective spec, in the input's snake_case format
// and field order.
type (
	wireCluster struct {
		DisplayName      string           `json:"display_name,omitempty"`
		Name             string           `json:"name"`
		Network          wireNetwork      `json:"network"`
		NodePools        []wireNodePool   `json:"node_pools"`
		OrchestratorSpec wireOrchestrator `json:"orchestrator_spec"`
	}
	wireNetwork struct {
		Network    string `json:"network"`
		Subnetwork string `json:"subnetwork,omitempty"`
	}
	wireNodePool struct {
		ID                   string          `json:"id"`
		MachineSpec          wireMachineSpec `json:"machine_spec"`
		ProvisioningModel    string          `json:"provisioning_model"`
		FlexStartMaxDuration string          `json:"flex_start_max_duration,omitempty"`
		ScalingSpec          wireScalingSpec `json:"scaling_spec"`
		Zone                 string          `json:"zone"`
		EnablePublicIPs      bool            `json:"enable_public_ips"`
		BootDisk             wireBootDisk    `json:"boot_disk"`
		NodeImage            string          `json:"node_image,omitempty"`
		// Flexslurm is the pool's "flexslurm" object (extension.go):
		// absent when every setting in it is unset.
		Flexslurm *wirePoolExtension `json:"flexslurm,omitempty"`
	}
	wireMachineSpec struct {
		MachineType      string `json:"machine_type"`
		AcceleratorType  string `json:"accelerator_type,omitempty"`
		AcceleratorCount int    `json:"accelerator_count,omitempty"`
	}
	wireScalingSpec struct {
		MinNodeCount int `json:"min_node_count"`
		MaxNodeCount int `json:"max_node_count"`
	}
	wireBootDisk struct {
		BootDiskType   string `json:"boot_disk_type"`
		BootDiskSizeGB int    `json:"boot_disk_size_gb"`
	}
	wireOrchestrator struct {
		SlurmSpec wireSlurmSpec `json:"slurm_spec"`
	}
	wireSlurmSpec struct {
		HomeDirectoryStorage string          `json:"home_directory_storage"`
		Partitions           []wirePartition `json:"partitions,omitempty"`
		LoginNodePoolID      string          `json:"login_node_pool_id"`
		DefaultPartitionID   string          `json:"default_partition_id,omitempty"`
	}
	wirePartition struct {
		ID          string   `json:"id"`
		NodePoolIDs []string `json:"node_pool_ids"`
	}
)

// EffectiveSHA256 is the hex SHA-256 of an effective spec (EffectiveJSON's
// bytes): the cluster record's spec_sha256, and the spec the agent reports
// having compared with Slurm's configuration.
func EffectiveSHA256(effective []byte) string {
	s := sha256.Sum256(effective)
	return hex.EncodeToString(s[:])
}

// EffectiveJSON renders the effective spec as indented JSON (two spaces,
// trailing newline) in the same snake_case format Parse reads, with every
// default written out: provisioning_model, flex_start_max_duration as
// "<seconds>s" on FLEX_START pools, enable_public_ips as a JSON boolean,
// scaling counts, and boot_disk type and size. Parse of the result yields a
// Cluster equal to c. HTML characters are not escaped.
func (c *Cluster) EffectiveJSON() ([]byte, error) {
	out := wireCluster{
		DisplayName: c.DisplayName,
		Name:        c.Name,
		Network:     wireNetwork(c.Network),
		NodePools:   make([]wireNodePool, 0, len(c.NodePools)),
		OrchestratorSpec: wireOrchestrator{SlurmSpec: wireSlurmSpec{
			HomeDirectoryStorage: c.Slurm.HomeDirectoryStorage,
			LoginNodePoolID:      c.Slurm.LoginNodePoolID,
			DefaultPartitionID:   c.Slurm.DefaultPartitionID,
		}},
	}
	for _, p := range c.NodePools {
		wp := wireNodePool{
			ID:                p.ID,
			MachineSpec:       wireMachineSpec(p.MachineSpec),
			ProvisioningModel: string(p.ProvisioningModel),
			ScalingSpec:       wireScalingSpec{MinNodeCount: p.MinNodeCount, MaxNodeCount: p.MaxNodeCount},
			Zone:              p.Zone,
			EnablePublicIPs:   p.EnablePublicIPs,
			BootDisk:          wireBootDisk{BootDiskType: p.BootDisk.Type, BootDiskSizeGB: p.BootDisk.SizeGB},
			NodeImage:         p.NodeImage,
			Flexslurm:         p.Ext.wire(),
		}
		if p.IsFlexStart() {
			wp.FlexStartMaxDuration = fmt.Sprintf("%ds", int64(p.FlexStartMaxDuration/time.Second))
		}
		wp.Flexslurm = p.Ext.wire()
		out.NodePools = append(out.NodePools, wp)
	}
	for _, part := range c.Slurm.Partitions {
		//lint:ignore S1016 listing the fields keeps a field added to Partition out of the API's wire form until it is added here
		wp := wirePartition{ID: part.ID, NodePoolIDs: part.NodePoolIDs}
		out.OrchestratorSpec.SlurmSpec.Partitions = append(out.OrchestratorSpec.SlurmSpec.Partitions, wp)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("encoding effective cluster spec: %w", err)
	}
	return buf.Bytes(), nil
}
