package nodeconfig

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/flexslurm/flexslurm/shared/inputs"
)

// Settings are a deployment's node settings: what every node pool's
// template needs beyond the cluster spec. `flexslurm apply` reads them
// (`--node-settings FILE`, e.g. `terraform output -json node_settings`),
// resolves the images, carries them in the cluster.applied event, and the
// functions store them with the cluster record, so a pool's template is the
// same between two applies of the same inputs.
type Settings struct {
	// Image is the boot image of pools without a node_image of their own.
	// In a settings file it may name an image family
	// ("projects/P/global/images/family/F"); once applied it is always a
	// specific image ("projects/P/global/images/NAME").
	Image string `json:"image" firestore:"image"`
	// PoolImages are the resolved images of the pools whose spec sets
	// node_pools[].node_image, by pool id. Filled by `flexslurm apply`.
	PoolImages map[string]string `json:"pool_images,omitempty" firestore:"pool_images,omitempty"`
	// ServiceAccount is the email of the nodes' service account; the
	// template gives it the cloud-platform scope.
	ServiceAccount string `json:"service_account" firestore:"service_account"`
	// ConfServer is slurmd's configless --conf-server ("host[:port]").
	ConfServer string `json:"conf_server" firestore:"conf_server"`
	// MungeKeySecret is the Secret Manager secret version holding the munge
	// key ("projects/P/secrets/S/versions/V").
	MungeKeySecret string `json:"munge_key_secret" firestore:"munge_key_secret"`
	// Home is where nodes mount the cluster's home directories. Its
	// Storage is the spec's home_directory_storage, set by `flexslurm
	// apply`.
	Home Mount `json:"home" firestore:"home"`
	// Topics are the topic ids the nodes' hooks publish to.
	Topics Topics `json:"topics" firestore:"topics"`
	// BinaryURL, when set, is a gs:// URL of the flexslurm binary that the
	// startup script installs as /usr/local/sbin/flexslurm (for images that
	// lack it).
	BinaryURL string `json:"binary_url,omitempty" firestore:"binary_url,omitempty"`
}

var (
	// saRE is a service account email: a user-managed account
	// (NAME@PROJECT.iam.gserviceaccount.com) or a Google-managed one such as
	// the Compute default account (NUMBER-compute@developer.gserviceaccount.com).
	saRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{4,62}@[a-z0-9.:-]+\.[a-z]+$`)
	// binaryURLRE is a gs:// object URL whose characters need no shell
	// quoting (bucket naming rules:
	// https://cloud.google.com/storage/docs/buckets#naming).
	binaryURLRE = regexp.MustCompile(`^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]/[A-Za-z0-9._/+=-]+$`)
)

// ParseImage splits an image reference into its project and either the
// image name or, for "projects/P/global/images/family/F", the family.
func ParseImage(ref string) (project, name string, family bool, err error) {
	// A specific image or an image family as a project-relative resource
	// path (https://cloud.google.com/compute/docs/reference/rest/v1/images):
	// both reach the path of an images.get or images.getFromFamily call.
	if m := inputs.Image.Submatch(ref); m != nil {
		return m[1], m[3], m[2] != "", nil
	}
	return "", "", false, fmt.Errorf("%q: want projects/P/global/images/NAME or projects/P/global/images/family/FAMILY", ref)
}

// Validate reports every problem with s, each naming its JSON field. With
// resolved, every image must be a specific image (no family), as in an
// applied cluster.
func (s Settings) Validate(resolved bool) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	checkImage := func(field, ref string) {
		_, _, family, err := ParseImage(ref)
		switch {
		case err != nil:
			bad(field, "%v", err)
		case family && resolved:
			bad(field, "%q is an image family; flexslurm apply resolves it to an image", ref)
		}
	}
	checkImage("image", s.Image)
	for pool, img := range s.PoolImages {
		if !inputs.PoolID.Match(pool) {
			bad("pool_images", "key %q: want a node pool id (%s)", pool, inputs.PoolID.Allowed)
			continue
		}
		checkImage("pool_images."+pool, img)
	}
	if !saRE.MatchString(s.ServiceAccount) {
		bad("service_account", "%q: want a service account email", s.ServiceAccount)
	}
	c := Config{Version: Version, Cluster: "c", Pool: "p", Project: "p",
		ConfServer: s.ConfServer, MungeKeySecret: s.MungeKeySecret, Home: s.Home, Topics: s.Topics}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if s.BinaryURL != "" && !binaryURLRE.MatchString(s.BinaryURL) {
		bad("binary_url", "%q: want gs://BUCKET/OBJECT", s.BinaryURL)
	}
	return errors.Join(errs...)
}

// PoolImage is the boot image of a pool: its own, else the default.
func (s Settings) PoolImage(pool string) string {
	if img, ok := s.PoolImages[pool]; ok {
		return img
	}
	return s.Image
}

// Config is the node config of one pool of a cluster in project.
func (s Settings) Config(cluster, project, pool string, gpus int) Config {
	return Config{
		Version: Version, Cluster: cluster, Pool: pool, Project: project,
		ConfServer: s.ConfServer, MungeKeySecret: s.MungeKeySecret,
		Home: s.Home, GPUCount: gpus, Topics: s.Topics,
	}
}

// BinaryPath is where the node's flexslurm binary lives.
const BinaryPath = "/usr/local/sbin/flexslurm"

// StartupScript is the AttrStartupScript value: as root, at every boot, it
// installs the flexslurm binary from binaryURL when that URL changed since
// the last install (nothing to do for "", an image that carries the
// binary), then runs `flexslurm node boot`. It is idempotent: a reboot with
// the same URL downloads nothing. binaryURL must be "" or a gs:// URL that
// Settings.Validate accepts; the download uses the image's gcloud and the
// node's service account.
func StartupScript(binaryURL string) string {
	var b strings.Builder
	b.WriteString(`#!/bin/bash
# flexslurm node bootstrap: written by flexslurm into the instance template.
set -euo pipefail
bin=` + BinaryPath + `
`)
	if binaryURL != "" {
		b.WriteString(`url='` + binaryURL + `'
stamp=/var/lib/flexslurm/binary-url
if [ ! -x "$bin" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$url" ]; then
  mkdir -p /var/lib/flexslurm "$(dirname "$bin")"
  tmp=$(mktemp "$bin.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  gcloud storage cp "$url" "$tmp"
  chmod 0755 "$tmp"
  mv -f "$tmp" "$bin"
  printf '%s\n' "$url" >"$stamp"
fi
`)
	}
	b.WriteString(`exec "$bin" node boot
`)
	return b.String()
}
