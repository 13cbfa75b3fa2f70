// Package inputs holds the strict patterns that every string from outside
// flexslurm's code (the cluster spec, the node settings, a node's metadata)
// is checked against before it reaches a configuration file (slurm.conf,
// gres.conf), the path of a Google API call, a resource name or label, or
// the argument list of a program (mount, slurmd, scontrol). A string that
// passes holds no white space, no control character, no option-looking
// leading "-", and none of the characters that carry meaning where it is
// written ("," "=" "#" ":" "[" "]" "/" where they do not belong).
//
// Each Rule says in words what it allows, for error messages that name the
// field, quote the value and say what would be accepted. docs/security.md,
// "Inputs and where they go", lists which field reaches which place.
//
// This package imports only the standard library.
package inputs

import (
	"fmt"
	"regexp"
	"unicode"
)

// Rule is one strict pattern: a whole-string match and what it allows, in
// words.
type Rule struct {
	re *regexp.Regexp
	// Allowed says what matches, for error messages ("1–16 lowercase
	// letters, …").
	Allowed string
}

func rule(pattern, allowed string) Rule {
	return Rule{re: regexp.MustCompile(pattern), Allowed: allowed}
}

// Match reports whether s matches the rule as a whole.
func (r Rule) Match(s string) bool { return r.re.MatchString(s) }

// Submatch returns the rule's capture groups of s, nil when s does not
// match.
func (r Rule) Submatch(s string) []string { return r.re.FindStringSubmatch(s) }

// Check returns nil when s matches, else an error "FIELD: "VALUE" is not
// allowed: want ALLOWED".
func (r Rule) Check(field, s string) error {
	if r.Match(s) {
		return nil
	}
	return fmt.Errorf("%s: %q is not allowed: want %s", field, s, r.Allowed)
}

// String is the regular expression, for tests and docs.
func (r Rule) String() string { return r.re.String() }

// Building blocks of the rules below.
const (
	// projectIDPat is a project id: 6–30 lowercase letters, digits and
	// hyphens, starting with a letter, not ending with a hyphen
	// (https://cloud.google.com/resource-manager/docs/creating-managing-projects#before_you_begin),
	// optionally after a domain prefix ("example.com:", or "s3ns:" for
	// S3NS projects).
	projectIDPat = `(?:[a-z][a-z0-9.-]{0,61}[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]`
	// projectRefPat is a project as a path segment of a resource name: an
	// id of the characters above (any length up to 30, as test projects
	// "p" are), or a project number.
	projectRefPat = `(?:(?:[a-z][a-z0-9.-]{0,61}[a-z0-9]:)?[a-z](?:[a-z0-9-]{0,28}[a-z0-9])?|[0-9]{1,20})`
	// rfc1035Pat is a Compute resource name: 1–63 characters, a lowercase
	// letter first, then lowercase letters, digits and hyphens, not ending
	// with a hyphen (https://cloud.google.com/compute/docs/naming-resources).
	rfc1035Pat = `[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?`
	// regionPat is a region: "us-central1", "europe-west4",
	// "northamerica-northeast1", and the S3NS form "u-france-east1"
	// (https://cloud.google.com/compute/docs/regions-zones).
	regionPat = `[a-z]+(?:-[a-z]+){1,2}[0-9]+`
	// hostPat is a DNS name or an IPv4 address: letters, digits, dots and
	// inner hyphens, a letter or digit first and last.
	hostPat = `[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?`
)

// The rules. Where a rule is the managed Slurm API's or Google's own, its
// comment cites it; where it is narrower, the comment says why.
var (
	// ClusterID is the id of a cluster with a slurm_spec
	// (https://github.com/GoogleCloudPlatform/magic-modules/blob/main/mmv1/products/vertexai/ModelDevelopmentCluster.yaml).
	// It is the first segment of every VM, MIG, template and node name,
	// and of the label flexslurm-cluster.
	ClusterID = rule(`^[a-z][a-z0-9]{0,9}$`, "1–10 lowercase letters and digits, starting with a letter")
	// PoolID is a node pool id: flexslurm's bound, so that the names built
	// from it (VM "<cluster>-<pool>-<index>-g<generation>", MIG
	// "fs-<cluster>-<pool>", template "fs-<cluster>-<pool>-<hash>", resize
	// request "rr-<node>-g<generation>", shared/naming) stay RFC 1035 names
	// of at most 63 characters, and the Slurm node names, features and
	// partition names built from it hold no character Slurm gives a
	// meaning to.
	PoolID = rule(`^[a-z](?:[a-z0-9-]{0,14}[a-z0-9])?$`, "1–16 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen")
	// PartitionID is a Slurm partition name as flexslurm writes it into
	// slurm.conf (PartitionName=…) and passes to Slurm's clients: a
	// letter, then letters, digits, "_" and "-", at most 63 — no white
	// space, "=", ",", "#", ":" or brackets, which slurm.conf and hostlist
	// syntax read.
	PartitionID = rule(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`, `1–63 letters, digits, "_" and "-", starting with a letter`)
	// ProjectID is a project id (see projectIDPat).
	ProjectID = rule(`^`+projectIDPat+`$`, `a project id: 6–30 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen, optionally after a domain prefix such as "example.com:"`)
	// ProjectRef is a project as a resource-name path segment: an id of
	// the project-id characters, or a project number.
	ProjectRef = rule(`^`+projectRefPat+`$`, "a project id (lowercase letters, digits and hyphens, starting with a letter, at most 30) or a project number")
	// Region is a Compute region.
	Region = rule(`^`+regionPat+`$`, `a region such as "us-central1" (lowercase letters, hyphens, then digits)`)
	// Zone is a Compute zone: a region and a one-letter suffix.
	Zone = rule(`^(`+regionPat+`)-[a-z]$`, `a zone such as "us-central1-a" (a region, "-" and one letter)`)
	// ResourceName is an RFC 1035 Compute resource name.
	ResourceName = rule(`^`+rfc1035Pat+`$`, "1–63 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen")
	// Network is a VPC network as a project-relative resource path
	// (https://cloud.google.com/compute/docs/reference/rest/v1/networks).
	Network = rule(`^projects/(`+projectRefPat+`)/global/networks/(`+rfc1035Pat+`)$`, "projects/PROJECT/global/networks/NAME")
	// Subnetwork is a subnetwork as a project-relative resource path
	// (https://cloud.google.com/compute/docs/reference/rest/v1/subnetworks).
	Subnetwork = rule(`^projects/(`+projectRefPat+`)/regions/(`+regionPat+`)/subnetworks/(`+rfc1035Pat+`)$`, "projects/PROJECT/regions/REGION/subnetworks/NAME")
	// Image is a boot image or image family as a project-relative
	// resource path (https://cloud.google.com/compute/docs/reference/rest/v1/images).
	Image = rule(`^projects/(`+projectRefPat+`)/global/images/(family/)?(`+rfc1035Pat+`)$`, "projects/PROJECT/global/images/NAME or projects/PROJECT/global/images/family/FAMILY")
	// HomeStorage is home_directory_storage: a Filestore (or Managed
	// Lustre) instance's full name, in a zone or a region
	// (https://cloud.google.com/filestore/docs/reference/rest/v1/projects.locations.instances).
	HomeStorage = rule(`^projects/(`+projectRefPat+`)/locations/(`+regionPat+`(?:-[a-z])?)/instances/(`+rfc1035Pat+`)$`, "projects/PROJECT/locations/ZONE_OR_REGION/instances/NAME")
	// NFSSource is an NFS export as mount(8) takes it: HOST:/PATH, the
	// host a DNS name or IPv4 address, the path absolute — no leading "-",
	// no white space, no control character and no "," (mount.nfs reads
	// none of them as part of a source).
	NFSSource = rule(`^`+hostPat+`:/[A-Za-z0-9._+/-]{0,1000}$`, `HOST:/EXPORT, HOST a DNS name or IPv4 address, EXPORT an absolute path of letters, digits, ".", "_", "+", "-" and "/"`)
	// LocalPath is an absolute directory a node mounts on or binds from: no
	// white space, control character or ",".
	LocalPath = rule(`^/[A-Za-z0-9._+@/-]{0,1000}$`, `an absolute path of letters, digits, ".", "_", "+", "@", "-" and "/"`)
	// ConfServer is slurmd's --conf-server: host[:port], several separated
	// by commas (https://slurm.schedmd.com/slurmd.html).
	ConfServer = rule(`^`+hostPat+`(?::[0-9]{1,5})?(?:,`+hostPat+`(?::[0-9]{1,5})?)*$`, "host[:port][,host[:port]...], each host a DNS name or IPv4 address")
	// TopicID is a Pub/Sub topic id: 3–255 characters, a letter first,
	// then letters, digits and "-_.~+%"
	// (https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names);
	// flexslurm leaves out "%" (no escapes in a URL path).
	TopicID = rule(`^[A-Za-z][A-Za-z0-9._~+-]{2,254}$`, `3–255 letters, digits and "-_.~+", starting with a letter`)
)

// HasControl reports whether s holds a control character (C0, DEL, C1) or
// a Unicode line or paragraph separator: what could end a line of a
// configuration file or of a command's output.
func HasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return true
		}
	}
	return false
}

// OneLine returns s with every control character, line or paragraph
// separator replaced by a space: a free text (a reason, a comment) made
// safe to put on one line of Slurm's state and output.
func OneLine(s string) string {
	if !HasControl(s) {
		return s
	}
	out := []rune(s)
	for i, r := range out {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			out[i] = ' '
		}
	}
	return string(out)
}
