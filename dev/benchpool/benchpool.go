// Package benchpool is what the benches (dev/expirybench, dev/tracebench)
// share: the cluster spec of one Flex-Start pool of a3-ultragpu-8g VMs, and
// the compact duration format of their reports.
package benchpool

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/spec"
)

// Zone is the zone of every bench cluster.
const Zone = "us-central1-a"

// Pool describes a bench cluster: its id, its one Flex-Start pool of
// a3-ultragpu-8g VMs (H200s, GPUs each), and the scaling of that pool.
type Pool struct {
	Cluster, ID    string
	GPUs           int
	MaxRunDuration time.Duration
	Min, Max       int
}

// Spec is the cluster_config.json of p: the Flex-Start pool, the login pool
// the managed Slurm API requires, and one partition for the pool.
func (p Pool) Spec() (*spec.Cluster, error) {
	doc := fmt.Sprintf(`{
  "display_name": %q,
  "name": "projects/flexslurm-bench/locations/us-central1/modelDevelopmentClusters/",
  "network": {
    "network": "projects/flexslurm-bench/global/networks/default",
    "subnetwork": "projects/flexslurm-bench/regions/us-central1/subnetworks/default"
  },
  "node_pools": [
    {
      "id": "login",
      "machine_spec": { "machine_type": "n2-standard-8" },
      "scaling_spec": { "min_node_count": 1, "max_node_count": 1 },
      "zone": %q,
      "boot_disk": { "boot_disk_type": "pd-standard", "boot_disk_size_gb": 120 }
    },
    {
      "id": %q,
      "machine_spec": { "machine_type": "a3-ultragpu-8g", "accelerator_type": "NVIDIA_H200_141GB", "accelerator_count": %d },
      "provisioning_model": "FLEX_START",
      "flex_start_max_duration": "%ds",
      "scaling_spec": { "min_node_count": %d, "max_node_count": %d },
      "zone": %q,
      "boot_disk": { "boot_disk_type": "hyperdisk-balanced", "boot_disk_size_gb": 400 }
    }
  ],
  "orchestrator_spec": {
    "slurm_spec": {
      "home_directory_storage": "projects/flexslurm-bench/locations/us-central1-a/instances/home",
      "partitions": [ { "id": %q, "node_pool_ids": [ %q ] } ],
      "login_node_pool_id": "login"
    }
  }
}`, p.Cluster, Zone, p.ID, p.GPUs, int64(p.MaxRunDuration/time.Second), p.Min, p.Max, Zone, p.ID, p.ID)
	return spec.Parse([]byte(doc))
}

// FormatDuration formats a duration compactly: 1d2h3m, 45m, 30s.
func FormatDuration(d time.Duration) string {
	if d == math.MinInt64 {
		d++ // its negation overflows; a nanosecond does not show
	}
	if d < 0 {
		return "-" + FormatDuration(-d)
	}
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	d = d.Round(time.Minute)
	days, d := d/(24*time.Hour), d%(24*time.Hour)
	hours, mins := d/time.Hour, (d%time.Hour)/time.Minute
	var b strings.Builder
	if days > 0 {
		fmt.Fprintf(&b, "%dd", days)
	}
	if hours > 0 {
		fmt.Fprintf(&b, "%dh", hours)
	}
	if mins > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%dm", mins)
	}
	return b.String()
}
