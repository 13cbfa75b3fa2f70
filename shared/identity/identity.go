// Package identity proves which VM sent a report: the sender attaches its
// VM's Google-signed instance identity token
// (https://cloud.google.com/compute/docs/instances/verifying-instance-identity),
// requested for an audience that names the cluster and the SHA-256 of the
// message's data, and the functions verify it with Google's own verifier
// (google.golang.org/api/idtoken) and match its claims — project, zone and
// instance name — to the VM the report names, or to the cluster's Slurm
// controller for the controller's reports.
//
// The token travels in the message's attributes, split into ordered chunks
// (identity.0, identity.1, …) since a Pub/Sub attribute value is at most
// 1024 bytes (https://cloud.google.com/pubsub/quotas#resource_limits) and a
// full-format token is longer. The payload is unchanged.
//
// A report that cannot be proven is refused: every such error wraps
// ErrRefused, and the caller logs, counts and acknowledges it. A failure to
// fetch Google's certificates wraps ErrUnavailable (retried).
package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/naming"
)

// ErrRefused marks a report whose sender is not proven (no token, a token
// that does not verify, or claims that do not match what the report
// names). It is never retried.
var ErrRefused = errors.New("sender not proven")

// ErrUnavailable marks a verification that could not be carried out (the
// certificates could not be fetched): the report is retried.
var ErrUnavailable = errors.New("identity verification unavailable")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// MetricRefused counts refused reports (a log line with metric=MetricRefused
// and metric_type=<event type>, as plan.Metric lines are counted).
const MetricRefused = "identity_refused"

// AttrPrefix prefixes the attributes that carry the token's chunks:
// identity.0, identity.1, …
const AttrPrefix = "identity."

// MaxChunkBytes is the largest chunk: Pub/Sub's limit on an attribute
// value.
const MaxChunkBytes = 1024

// MaxChunks bounds the chunks of one token (4 KiB; Google's full-format
// tokens are about 1.1–1.4 kB).
const MaxChunks = 4

// Audience is the audience a sender asks its token for: a URI (the
// metadata server's audience is "a unique URI agreed upon by both the
// instance and the system verifying the instance's identity",
// verifying-instance-identity) naming the cluster and the SHA-256 of the
// message data, so that a captured token proves nothing for another
// cluster or another payload. flexslurm.invalid is a reserved name (RFC
// 2606) that resolves nowhere.
func Audience(cluster string, data []byte) string {
	sum := sha256.Sum256(data)
	return "https://flexslurm.invalid/" + cluster + "/" + hex.EncodeToString(sum[:])
}

// Attributes splits a token into the attributes that carry it.
func Attributes(token string) (map[string]string, error) {
	if token == "" {
		return nil, errors.New("empty identity token")
	}
	if len(token) > MaxChunks*MaxChunkBytes {
		return nil, fmt.Errorf("identity token of %d bytes is above the limit of %d", len(token), MaxChunks*MaxChunkBytes)
	}
	attrs := map[string]string{}
	for i := 0; len(token) > 0; i++ {
		n := min(len(token), MaxChunkBytes)
		attrs[AttrPrefix+strconv.Itoa(i)] = token[:n]
		token = token[n:]
	}
	return attrs, nil
}

// Token reassembles the token from a message's attributes. It refuses a
// message without one, with a gap in its chunks, too many or oversized
// chunks, or an attribute under AttrPrefix it does not know.
func Token(attrs map[string]string) (string, error) {
	n := 0
	for k := range attrs {
		if !strings.HasPrefix(k, AttrPrefix) {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(k, AttrPrefix))
		if err != nil || i < 0 || i >= MaxChunks || strconv.Itoa(i) != strings.TrimPrefix(k, AttrPrefix) {
			return "", refused("attribute %q is not an identity chunk (%s0 … %s%d)", k, AttrPrefix, AttrPrefix, MaxChunks-1)
		}
		n++
	}
	if n == 0 {
		return "", refused("no identity token (attributes %s0 …)", AttrPrefix)
	}
	var b strings.Builder
	for i := range n {
		c, ok := attrs[AttrPrefix+strconv.Itoa(i)]
		if !ok {
			return "", refused("identity chunk %s%d is missing", AttrPrefix, i)
		}
		if len(c) == 0 || len(c) > MaxChunkBytes {
			return "", refused("identity chunk %s%d is %d bytes (1–%d)", AttrPrefix, i, len(c), MaxChunkBytes)
		}
		b.WriteString(c)
	}
	return b.String(), nil
}

// Claims are what a verified token proves: its google.compute_engine
// claims.
type Claims struct {
	Project       string // project_id
	ProjectNumber string // project_number
	Zone          string // zone
	Instance      string // instance_name
	InstanceID    string // instance_id
}

// VM names a Compute Engine instance.
type VM struct {
	Project, Zone, Name string
}

func (v VM) String() string {
	return "projects/" + v.Project + "/zones/" + v.Zone + "/instances/" + v.Name
}

var (
	zoneRe = regexp.MustCompile(`^[a-z]+(-[a-z0-9]+)+$`)
	nameRe = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// ParseVM parses "zones/ZONE/instances/NAME" or
// "projects/PROJECT/zones/ZONE/instances/NAME"; the project defaults to
// project.
func ParseVM(s, project string) (VM, error) {
	parts := strings.Split(s, "/")
	v := VM{Project: project}
	switch {
	case len(parts) == 4 && parts[0] == "zones" && parts[2] == "instances":
		v.Zone, v.Name = parts[1], parts[3]
	case len(parts) == 6 && parts[0] == "projects" && parts[2] == "zones" && parts[4] == "instances":
		v.Project, v.Zone, v.Name = parts[1], parts[3], parts[5]
	default:
		return VM{}, fmt.Errorf("%q is not zones/ZONE/instances/NAME", s)
	}
	if !zoneRe.MatchString(v.Zone) {
		return VM{}, fmt.Errorf("%q: zone %q is not a zone name (e.g. us-central1-a)", s, v.Zone)
	}
	if !nameRe.MatchString(v.Name) {
		return VM{}, fmt.Errorf("%q: instance name %q is not a Compute Engine name", s, v.Name)
	}
	if v.Project == "" {
		return VM{}, fmt.Errorf("%q: no project", s)
	}
	return v, nil
}

// Want is what a report's token must prove.
type Want struct {
	Project string // the deployment's project
	Zone    string // the VM's zone
	// Zones, when set, are the zones the VM may be in (a multi-zone pool's
	// zones): the token's zone must be one of them, Zone among them.
	Zones []string
	// Instance is the exact instance name, or, when empty, NodeOf names a
	// node whose VM ("<node>-g<generation>") any generation may be.
	Instance string
	NodeOf   string
	// Role names the sender in refusals: "node", "controller".
	Role string
}

// Match checks claims against what the report names.
func (w Want) Match(c Claims) error {
	if w.Project == "" || w.Zone == "" || (w.Instance == "" && w.NodeOf == "") {
		return refused("nothing to match the token against (project %q, zone %q, instance %q)", w.Project, w.Zone, w.Instance)
	}
	if c.Project != w.Project {
		return refused("token of project %q, want %q", c.Project, w.Project)
	}
	if c.Zone != w.Zone && !slices.Contains(w.Zones, c.Zone) {
		if len(w.Zones) > 0 {
			return refused("token of zone %q, want one of %s zones %q", c.Zone, w.Role, w.Zones)
		}
		return refused("token of zone %q, want %s zone %q", c.Zone, w.Role, w.Zone)
	}
	switch {
	case w.Instance != "":
		if c.Instance != w.Instance {
			return refused("token of instance %q, want %s %q", c.Instance, w.Role, w.Instance)
		}
	default:
		// "<node>-g<generation>", or the name a MIG made from that base
		// ("<node>-g<generation>-xxxx": naming.ParseVMName).
		if node, _, _, _, ok := naming.ParseVMName(c.Instance); !ok || node != w.NodeOf {
			return refused("token of instance %q, which is not a VM of node %s", c.Instance, w.NodeOf)
		}
	}
	return nil
}

// Verifier proves who sent a message: it verifies the identity token in
// attrs for the audience of (cluster, data) and matches its claims against
// want. Errors wrap ErrRefused or ErrUnavailable.
type Verifier interface {
	Verify(ctx context.Context, cluster string, data []byte, attrs map[string]string, want Want) (Claims, error)
}
