// Package preflight checks flexslurm's permission prerequisite before a
// cluster is deployed: the Google APIs service agent of the project
// (PROJECT_NUMBER@cloudservices.gserviceaccount.com on Google Cloud; the
// domain differs per universe) creates and deletes the node pools' VMs for
// their managed instance groups, so it must hold roles/editor (roles/owner
// also does), or both roles/compute.instanceAdmin.v1 and
// roles/iam.serviceAccountUser (https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/using-flex-start-vms-with-slurm-clusters; the policy is read as
// https://cloud.google.com/resource-manager/reference/rest/v3/projects/getIamPolicy describes).
//
// The check reads the project's IAM policy through the Resource Manager v3
// API (GetProject for the project number, GetIamPolicy with policy version
// 3). It is deliberately conservative: a conditional binding is not a grant,
// and a role held through a folder, the organization or a group is not
// visible in the project's policy, so a negative answer means "not granted
// at project level", and the report says so.
//
// It also checks the Compute quotas a spec's Flex-Start pools consume at
// their maximums (CheckQuotas, quota.go).
//
// This package imports no other flexslurm package.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"cloud.google.com/go/iam/apiv1/iampb"
	resourcemanager "cloud.google.com/go/resourcemanager/apiv3"
	"cloud.google.com/go/resourcemanager/apiv3/resourcemanagerpb"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
)

// Roles the check looks for.
const (
	RoleEditor             = "roles/editor"
	RoleOwner              = "roles/owner"
	RoleInstanceAdmin      = "roles/compute.instanceAdmin.v1"
	RoleServiceAccountUser = "roles/iam.serviceAccountUser"
)

// Roles lists the checked roles in the order the report prints them.
var Roles = []string{RoleEditor, RoleOwner, RoleInstanceAdmin, RoleServiceAccountUser}

// Pair is the least-privilege alternative to roles/editor: both are needed.
var Pair = []string{RoleInstanceAdmin, RoleServiceAccountUser}

// why says what each role of the pair lets the service agent do.
var why = map[string]string{
	RoleEditor:             "broad project access; includes everything below",
	RoleOwner:              "superset of roles/editor",
	RoleInstanceAdmin:      "create, list and delete the node pools' VMs for their managed instance groups",
	RoleServiceAccountUser: "attach a service account to the VMs it creates",
}

// DefaultUniverse is the Google Cloud universe domain.
const DefaultUniverse = "googleapis.com"

// AgentLocalPrefix is how the service agent's domain starts: its member is
// serviceAccount:PROJECT_NUMBER@cloudservices.<rest>.
const AgentLocalPrefix = "cloudservices."

// knownAgentDomains is the service agent's domain per universe, where it is
// documented (https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/using-flex-start-vms-with-slurm-clusters).
var knownAgentDomains = map[string]string{
	DefaultUniverse: "cloudservices.gserviceaccount.com",
}

// plausibleAgentDomains lists, per universe whose service-agent domain is
// not documented, the forms its service-account domains suggest (S3NS key
// differences page, https://documentation.s3ns.fr/docs/overview/tpc-key-differences). They are only offered as hints.
var plausibleAgentDomains = map[string][]string{
	"s3nsapis.fr": {
		"cloudservices.s3ns-system.iam.gserviceaccount.com",
		"cloudservices.s3ns-system.system.gserviceaccount.com",
	},
}

// Errors returned (wrapped) by Check. Test with errors.Is.
var (
	// ErrAgentUnknown: the service agent's domain could not be told: it is
	// not given, no member of the policy matches it, and the universe's
	// domain is not documented.
	ErrAgentUnknown = errors.New("cannot tell the Google APIs service agent's address")
	// ErrAgentAmbiguous: the policy names several cloudservices agents of
	// the project under different domains.
	ErrAgentAmbiguous = errors.New("several Google APIs service agent addresses in the policy")
	// ErrInvalid reports an invalid option.
	ErrInvalid = errors.New("invalid preflight option")
)

// Projects is what Check needs from the Resource Manager projects API.
// *resourcemanager.ProjectsClient satisfies it.
type Projects interface {
	// GetProject returns the project named "projects/ID" (or
	// "projects/NUMBER"); its Name is "projects/NUMBER".
	GetProject(ctx context.Context, req *resourcemanagerpb.GetProjectRequest, opts ...gax.CallOption) (*resourcemanagerpb.Project, error)
	// GetIamPolicy returns the project's own IAM policy (no inherited
	// bindings, groups not expanded).
	GetIamPolicy(ctx context.Context, req *iampb.GetIamPolicyRequest, opts ...gax.CallOption) (*iampb.Policy, error)
}

var _ Projects = (*resourcemanager.ProjectsClient)(nil)

// NewClient returns a Resource Manager v3 REST client for universe ("" is
// googleapis.com, unless GOOGLE_CLOUD_UNIVERSE_DOMAIN says otherwise, as the
// client library reads it); opts come last and win (tests pass
// option.WithEndpoint and option.WithoutAuthentication). The caller closes
// it.
func NewClient(ctx context.Context, universe string, opts ...option.ClientOption) (*resourcemanager.ProjectsClient, error) {
	var all []option.ClientOption
	if universe != "" {
		all = append(all, option.WithUniverseDomain(universe))
	}
	c, err := resourcemanager.NewProjectsRESTClient(ctx, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("creating Resource Manager client: %w", err)
	}
	return c, nil
}

// Options selects what Check checks.
type Options struct {
	// Project is the project id (or number) whose policy is read. Required.
	// In S3NS ids carry the "s3ns:" prefix.
	Project string
	// ProjectNumber, when set, is used instead of asking GetProject.
	ProjectNumber string
	// Universe is the universe domain ("" is googleapis.com). It chooses the
	// default service-agent domain and the hints.
	Universe string
	// AgentDomain is the domain of the service agent's address, after the
	// "@" (e.g. "cloudservices.gserviceaccount.com"). "" means: the domain
	// of the policy member serviceAccount:NUMBER@cloudservices.* if there
	// is one, else the universe's documented domain.
	AgentDomain string
}

// Status is what the project policy says about one role for the agent.
type Status int

// Role statuses.
const (
	// NotGranted: no binding of the role names the agent at project level.
	NotGranted Status = iota
	// Conditional: only bindings with a condition name the agent; they do
	// not count as grants.
	Conditional
	// Granted: an unconditional binding names the agent.
	Granted
)

// RoleCheck is the finding for one role.
type RoleCheck struct {
	Role   string
	Status Status
	// Conditions are the conditions of the bindings that name the agent
	// under a condition, as "title: expression" (title omitted when empty).
	Conditions []string
}

// Report is the outcome of Check.
type Report struct {
	Project       string
	ProjectNumber string
	// Universe is the universe domain checked ("googleapis.com" when unset).
	Universe string
	// Agent is the service agent's member, "serviceAccount:NUMBER@DOMAIN".
	Agent string
	// AgentSource says where the domain came from: "given", "policy" or
	// "default".
	AgentSource string
	// OtherAgents are cloudservices members of the project number under
	// other domains than Agent's (only when the domain was given).
	OtherAgents []string
	// Checks has one entry per role of Roles, in that order.
	Checks []RoleCheck
	// SatisfiedBy lists the unconditional grant(s) that meet the
	// prerequisite: [roles/editor], [roles/owner] or Pair; empty when it is
	// not met.
	SatisfiedBy []string
	// Missing lists the roles to grant when the prerequisite is not met:
	// the roles of Pair not granted unconditionally.
	Missing []string
}

// OK reports whether the prerequisite is met at project level.
func (r *Report) OK() bool { return len(r.SatisfiedBy) > 0 }

// Check reads the project's number (unless given) and IAM policy, finds the
// Google APIs service agent and reports which prerequisite roles it holds
// unconditionally at project level. It returns an error (wrapped) when the
// API calls fail, when an option is invalid (ErrInvalid), or when the agent
// cannot be identified (ErrAgentUnknown, ErrAgentAmbiguous).
func Check(ctx context.Context, p Projects, o Options) (*Report, error) {
	if o.Project == "" {
		return nil, fmt.Errorf("%w: no project", ErrInvalid)
	}
	if o.ProjectNumber != "" && !digits(o.ProjectNumber) {
		return nil, fmt.Errorf("%w: project number %q is not a number", ErrInvalid, o.ProjectNumber)
	}
	if o.AgentDomain != "" && (strings.ContainsAny(o.AgentDomain, "@:/ ") || !strings.Contains(o.AgentDomain, ".")) {
		return nil, fmt.Errorf("%w: agent domain %q is not a domain (e.g. %s)", ErrInvalid, o.AgentDomain, knownAgentDomains[DefaultUniverse])
	}
	universe := o.Universe
	if universe == "" {
		universe = DefaultUniverse
	}
	r := &Report{Project: o.Project, ProjectNumber: o.ProjectNumber, Universe: universe}

	// 1. The project number, which names the service agent.
	if r.ProjectNumber == "" {
		prj, err := p.GetProject(ctx, &resourcemanagerpb.GetProjectRequest{Name: "projects/" + o.Project})
		if err != nil {
			return nil, fmt.Errorf("reading project %s (needs resourcemanager.projects.get): %w", o.Project, err)
		}
		n, ok := strings.CutPrefix(prj.GetName(), "projects/")
		if !ok || !digits(n) {
			return nil, fmt.Errorf("reading project %s: unexpected project name %q", o.Project, prj.GetName())
		}
		r.ProjectNumber = n
	}

	// 2. The policy, at version 3 so that conditional bindings come back
	// whole.
	pol, err := p.GetIamPolicy(ctx, &iampb.GetIamPolicyRequest{
		Resource: "projects/" + o.Project,
		Options:  &iampb.GetPolicyOptions{RequestedPolicyVersion: 3},
	})
	if err != nil {
		return nil, fmt.Errorf("reading the IAM policy of project %s (needs resourcemanager.projects.getIamPolicy): %w", o.Project, err)
	}

	// 3. The agent's address.
	found := agentDomains(pol, r.ProjectNumber)
	switch {
	case o.AgentDomain != "":
		r.AgentSource = "given"
		r.Agent = member(r.ProjectNumber, o.AgentDomain)
		for _, d := range found {
			if d != o.AgentDomain {
				r.OtherAgents = append(r.OtherAgents, member(r.ProjectNumber, d))
			}
		}
	case len(found) == 1:
		r.AgentSource = "policy"
		r.Agent = member(r.ProjectNumber, found[0])
	case len(found) > 1:
		if d, ok := knownAgentDomains[universe]; ok && slices.Contains(found, d) {
			r.AgentSource = "policy"
			r.Agent = member(r.ProjectNumber, d)
			break
		}
		return nil, fmt.Errorf("%w: %s; pass the right domain (--agent-domain)", ErrAgentAmbiguous, strings.Join(found, ", "))
	default:
		d, ok := knownAgentDomains[universe]
		if !ok {
			hint := "pass its domain (--agent-domain)"
			if forms := plausibleAgentDomains[universe]; len(forms) > 0 {
				hint = fmt.Sprintf("its domain in universe %s is not documented (plausible: %s); pass it (--agent-domain)",
					universe, strings.Join(forms, " or "))
			}
			return nil, fmt.Errorf("%w: no member %s%s@%s* in the policy of project %s, and %s",
				ErrAgentUnknown, "serviceAccount:", r.ProjectNumber, AgentLocalPrefix, o.Project, hint)
		}
		r.AgentSource = "default"
		r.Agent = member(r.ProjectNumber, d)
	}

	// 4. The roles.
	held := map[string]*RoleCheck{}
	for _, role := range Roles {
		held[role] = &RoleCheck{Role: role}
	}
	for _, b := range pol.GetBindings() {
		rc, ok := held[b.GetRole()]
		if !ok || !slices.Contains(b.GetMembers(), r.Agent) {
			continue
		}
		if c := b.GetCondition(); c != nil {
			if rc.Status == NotGranted {
				rc.Status = Conditional
			}
			desc := c.GetExpression()
			if c.GetTitle() != "" {
				desc = c.GetTitle() + ": " + desc
			}
			rc.Conditions = append(rc.Conditions, desc)
			continue
		}
		rc.Status = Granted
	}
	for _, role := range Roles {
		r.Checks = append(r.Checks, *held[role])
	}
	granted := func(role string) bool { return held[role].Status == Granted }
	switch {
	case granted(RoleEditor):
		r.SatisfiedBy = []string{RoleEditor}
	case granted(RoleOwner):
		r.SatisfiedBy = []string{RoleOwner}
	case granted(RoleInstanceAdmin) && granted(RoleServiceAccountUser):
		r.SatisfiedBy = slices.Clone(Pair)
	default:
		for _, role := range Pair {
			if !granted(role) {
				r.Missing = append(r.Missing, role)
			}
		}
	}
	return r, nil
}

// agentDomains returns the sorted distinct domains of the policy members
// serviceAccount:NUMBER@cloudservices.*, conditional bindings included.
func agentDomains(pol *iampb.Policy, number string) []string {
	prefix := "serviceAccount:" + number + "@"
	seen := map[string]bool{}
	for _, b := range pol.GetBindings() {
		for _, m := range b.GetMembers() {
			if d, ok := strings.CutPrefix(m, prefix); ok && strings.HasPrefix(d, AgentLocalPrefix) {
				seen[d] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

func member(number, domain string) string { return "serviceAccount:" + number + "@" + domain }

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// GrantCommand is the gcloud command that grants role to the report's agent
// on its project. --condition=None keeps gcloud from prompting when the
// policy already has conditional bindings.
func (r *Report) GrantCommand(role string) string {
	return fmt.Sprintf("gcloud projects add-iam-policy-binding %s --member=%s --role=%s --condition=None",
		shellQuote(r.Project), shellQuote(r.Agent), role)
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	safe := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@%+=:,./-_", c)) {
			safe = false
			break
		}
	}
	if safe && s != "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Write prints the report for a person: the agent, each role's status, the
// verdict, and when roles are missing, what they are for and the commands
// that grant them, followed by the limits of a project-level check.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "project %s (number %s, universe %s)\n", r.Project, r.ProjectNumber, r.Universe)
	src := map[string]string{
		"given":   "as given",
		"policy":  "found in the project's IAM policy",
		"default": "the universe's documented address; not named in the project's IAM policy",
	}[r.AgentSource]
	fmt.Fprintf(&b, "Google APIs service agent: %s (%s)\n", r.Agent, src)
	for _, o := range r.OtherAgents {
		fmt.Fprintf(&b, "  note: the policy also names %s\n", o)
	}
	b.WriteString("\nroles held at project level (conditional bindings do not count):\n")
	for _, c := range r.Checks {
		var s string
		switch c.Status {
		case Granted:
			s = "granted"
		case Conditional:
			s = "NOT granted: only under condition " + strings.Join(quoteAll(c.Conditions), ", ")
		default:
			s = "not granted at project level"
		}
		fmt.Fprintf(&b, "  %-31s %s\n", c.Role, s)
	}
	b.WriteString("\n")
	if r.OK() {
		fmt.Fprintf(&b, "OK: the service agent holds %s unconditionally at project level.\n", strings.Join(r.SatisfiedBy, " and "))
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "MISSING: %s\n", strings.Join(r.Missing, ", "))
	fmt.Fprintf(&b, "The service agent needs %s (or %s), or both %s.\n", RoleEditor, RoleOwner, strings.Join(Pair, " and "))
	for _, role := range r.Missing {
		fmt.Fprintf(&b, "  %s: %s\n", role, why[role])
	}
	b.WriteString("Grant the missing roles (least privilege) with:\n")
	for _, role := range r.Missing {
		fmt.Fprintf(&b, "  %s\n", r.GrantCommand(role))
	}
	if r.Universe != DefaultUniverse {
		fmt.Fprintf(&b, "(with gcloud configured for universe %s: gcloud config set universe_domain %s)\n", r.Universe, r.Universe)
	}
	b.WriteString("\nNot visible at project level: roles inherited from a folder or the organization,\n" +
		"roles held through a group, and custom roles carrying the same permissions. If the\n" +
		"agent holds the roles that way it may already have access; confirm with Policy\n" +
		"Troubleshooter")
	if r.Universe == DefaultUniverse {
		fmt.Fprintf(&b, ", e.g.\n  gcloud policy-intelligence troubleshoot-policy iam //cloudresourcemanager.googleapis.com/projects/%s --principal-email=%s --permission=compute.instances.create\n",
			r.Project, strings.TrimPrefix(r.Agent, "serviceAccount:"))
	} else {
		b.WriteString(" where universe " + r.Universe + " offers it.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
