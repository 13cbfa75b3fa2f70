// Package instancetemplate builds the instance template of a node pool,
// once: the complete body flexslurm sends to Compute Engine
// (instanceTemplates.insert), in the API's own JSON shape, and its name,
// which is a hash of exactly that body. Any change to what is sent is a new
// template; an unchanged body keeps its name.
//
// Build is pure. shared/plan names pools' templates with it and
// shared/apply sends what it returns; shared/gce only converts the body to
// the client's types and checks it.
package instancetemplate

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/version"
)

// CloudPlatformScope is the OAuth scope of the nodes' service account: IAM
// roles, not scopes, bound what it may do
// (https://cloud.google.com/compute/docs/access/service-accounts#scopes_best_practice).
const CloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// Template is an instance template as the Compute v1 REST API takes it
// (https://cloud.google.com/compute/docs/reference/rest/v1/instanceTemplates),
// restricted to the fields flexslurm sets. Its JSON is what is sent.
type Template struct {
	Name        string     `json:"name,omitempty"`
	Description string     `json:"description,omitempty"`
	Properties  Properties `json:"properties"`
}

// Properties are the template's instance properties.
type Properties struct {
	Description         string               `json:"description,omitempty"`
	MachineType         string               `json:"machineType"`
	Disks               []Disk               `json:"disks"`
	NetworkInterfaces   []NetworkInterface   `json:"networkInterfaces"`
	ServiceAccounts     []ServiceAccount     `json:"serviceAccounts,omitempty"`
	GuestAccelerators   []Accelerator        `json:"guestAccelerators,omitempty"`
	Scheduling          Scheduling           `json:"scheduling"`
	ReservationAffinity *ReservationAffinity `json:"reservationAffinity,omitempty"`
	Labels              map[string]string    `json:"labels,omitempty"`
	Metadata            *Metadata            `json:"metadata,omitempty"`
}

// Disk is an attached disk created with the VM.
type Disk struct {
	Boot             bool             `json:"boot"`
	AutoDelete       bool             `json:"autoDelete"`
	Type             string           `json:"type"`
	InitializeParams InitializeParams `json:"initializeParams"`
}

// InitializeParams create a new disk.
type InitializeParams struct {
	DiskType    string `json:"diskType,omitempty"`
	DiskSizeGb  int64  `json:"diskSizeGb,omitempty,string"`
	SourceImage string `json:"sourceImage,omitempty"`
}

// NetworkInterface is the VM's network interface.
type NetworkInterface struct {
	Network       string         `json:"network,omitempty"`
	Subnetwork    string         `json:"subnetwork,omitempty"`
	AccessConfigs []AccessConfig `json:"accessConfigs,omitempty"`
}

// AccessConfig gives the VM an external IP address.
type AccessConfig struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// ServiceAccount is the VM's service account.
type ServiceAccount struct {
	Email  string   `json:"email"`
	Scopes []string `json:"scopes"`
}

// Accelerator is a guest accelerator (GPUs attached to N1).
type Accelerator struct {
	AcceleratorType  string `json:"acceleratorType"`
	AcceleratorCount int    `json:"acceleratorCount"`
}

// Scheduling is the VM's scheduling.
type Scheduling struct {
	ProvisioningModel         string    `json:"provisioningModel"`
	InstanceTerminationAction string    `json:"instanceTerminationAction,omitempty"`
	MaxRunDuration            *Duration `json:"maxRunDuration,omitempty"`
	OnHostMaintenance         string    `json:"onHostMaintenance,omitempty"`
	AutomaticRestart          *bool     `json:"automaticRestart,omitempty"`
}

// Duration is a Compute duration (int64 seconds, sent as a JSON string).
type Duration struct {
	Seconds int64 `json:"seconds,string"`
}

// ReservationAffinity says which reservations the VM may consume.
type ReservationAffinity struct {
	ConsumeReservationType string `json:"consumeReservationType"`
}

// Metadata is instance metadata.
type Metadata struct {
	Items []MetadataItem `json:"items"`
}

// MetadataItem is one metadata entry.
type MetadataItem struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Get returns the value of metadata key k.
func (m *Metadata) Get(k string) (string, bool) {
	if m == nil {
		return "", false
	}
	for _, it := range m.Items {
		if it.Key == k {
			return it.Value, true
		}
	}
	return "", false
}

// JSON is the template's canonical JSON: what is sent to Compute.
func (t Template) JSON() []byte {
	b, err := json.Marshal(t)
	if err != nil {
		// Only strings, numbers, booleans, slices and maps of strings:
		// Marshal cannot fail.
		panic(fmt.Sprintf("instance template %s: %v", t.Name, err))
	}
	return b
}

// BuilderVersion is the flexslurm version of the binary that builds
// templates (the functions), recorded in each template's metadata
// (nodeconfig.AttrVersion) for the node's bootstrap to compare with its
// own; "" (a build that recorded none, as test binaries) records nothing.
// A template's name hashes its body, so functions of another version build
// another template.
var BuilderVersion = version.Get().ID()

// Build returns the complete instance template of pool p of cluster c with
// the deployment's node settings s, named by a hash of its body
// (naming.Template). s must hold resolved images (Settings.Validate(true)).
// FLEX_START pools get scheduling{provisioningModel FLEX_START,
// instanceTerminationAction DELETE, maxRunDuration, onHostMaintenance
// TERMINATE, automaticRestart false} and reservationAffinity NO_RESERVATION
// (https://docs.cloud.google.com/ai-hypercomputer/docs/create/create-mig-with-a4-or-a3ultra).
// GPUs: accelerator-optimized machine types come with theirs; an N1 pool's
// are attached as guestAccelerators.
func Build(c *spec.Cluster, p spec.NodePool, s nodeconfig.Settings) (Template, error) {
	fail := func(format string, a ...any) (Template, error) {
		return Template{}, fmt.Errorf("instance template of pool %s: "+format, append([]any{p.ID}, a...)...)
	}
	if err := s.Validate(true); err != nil {
		return fail("node settings: %w", err)
	}
	m, ok := spec.LookupMachine(p.MachineSpec.MachineType)
	if !ok {
		return fail("machine type %q is not in flexslurm's machine catalog", p.MachineSpec.MachineType)
	}
	gpus := m.GPUs
	var accel []Accelerator
	if !m.Bundled() && p.MachineSpec.AcceleratorCount > 0 {
		gpus = p.MachineSpec.AcceleratorCount
		accel = []Accelerator{{AcceleratorType: spec.AcceleratorName(p.MachineSpec.AcceleratorType), AcceleratorCount: gpus}}
	}
	image := s.PoolImage(p.ID)
	if _, resolved := s.PoolImages[p.ID]; p.NodeImage != "" && !resolved {
		// The pool asks for its own image: never fall back to the default.
		return fail("node_image %s has no resolved image in the node settings (pool_images.%s); apply the spec with flexslurm apply", p.NodeImage, p.ID)
	}
	cfg, err := s.Config(c.ID, c.Project, p.ID, gpus).Encode()
	if err != nil {
		return fail("%w", err)
	}
	desc := fmt.Sprintf("flexslurm node pool %s of cluster %s", p.ID, c.ID)
	props := Properties{
		Description: desc,
		MachineType: m.Name,
		Disks: []Disk{{
			Boot: true, AutoDelete: true, Type: "PERSISTENT",
			InitializeParams: InitializeParams{DiskType: p.BootDisk.Type, DiskSizeGb: int64(p.BootDisk.SizeGB), SourceImage: image},
		}},
		NetworkInterfaces: []NetworkInterface{{Network: c.Network.Network, Subnetwork: c.Network.Subnetwork}},
		ServiceAccounts:   []ServiceAccount{{Email: s.ServiceAccount, Scopes: []string{CloudPlatformScope}}},
		GuestAccelerators: accel,
		Labels:            naming.Labels(c.ID, p.ID),
		Metadata: &Metadata{Items: []MetadataItem{
			{Key: nodeconfig.AttrConfig, Value: cfg},
			{Key: nodeconfig.AttrStartupScript, Value: nodeconfig.StartupScript(s.BinaryURL)},
		}},
	}
	if BuilderVersion != "" {
		props.Metadata.Items = append(props.Metadata.Items, MetadataItem{Key: nodeconfig.AttrVersion, Value: BuilderVersion})
	}
	if p.EnablePublicIPs {
		props.NetworkInterfaces[0].AccessConfigs = []AccessConfig{{Name: "External NAT", Type: "ONE_TO_ONE_NAT"}}
	}
	no := false
	switch p.ProvisioningModel {
	case spec.ProvisioningFlexStart:
		props.Scheduling = Scheduling{
			ProvisioningModel: "FLEX_START", InstanceTerminationAction: "DELETE",
			MaxRunDuration:    &Duration{Seconds: int64(p.ComputeRunDuration() / time.Second)},
			OnHostMaintenance: "TERMINATE", AutomaticRestart: &no,
		}
		props.ReservationAffinity = &ReservationAffinity{ConsumeReservationType: "NO_RESERVATION"}
	case spec.ProvisioningSpot:
		props.Scheduling = Scheduling{ProvisioningModel: "SPOT", InstanceTerminationAction: "DELETE", OnHostMaintenance: "TERMINATE", AutomaticRestart: &no}
	case spec.ProvisioningOnDemand:
		props.Scheduling = Scheduling{ProvisioningModel: "STANDARD"}
		if gpus > 0 {
			// GPU VMs cannot live-migrate.
			props.Scheduling.OnHostMaintenance = "TERMINATE"
		}
	default:
		return fail("provisioning model %s has no template", p.ProvisioningModel)
	}
	t := Template{Description: desc, Properties: props}
	t.Name = naming.Template(c.ID, p.ID, string(t.JSON()))
	return t, nil
}
