package gce

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"
)

// Project-wide listings and the deletions `flexslurm teardown` needs. The
// aggregated lists (instances.aggregatedList,
// instanceGroupManagers.aggregatedList in the Compute v1 discovery document)
// cover every zone and region of the project, so nothing is missed because
// its zone is no longer named anywhere.

// InstanceTemplate is a global instance template.
type InstanceTemplate struct {
	// Name is the template name.
	Name string
	// Path is "projects/P/global/instanceTemplates/NAME", the form MIGRef
	// uses for the templates a MIG references.
	Path string
	// Labels are properties.labels: the labels the template gives its VMs.
	// Templates have no labels of their own in the v1 API.
	Labels map[string]string
	// Created is the creation time (UTC).
	Created time.Time
}

// MIGRef is a managed instance group in any zone or region.
type MIGRef struct {
	// Zone is the zone of a zonal MIG, "" for a regional one.
	Zone string
	// Region is the region of a regional MIG, "" for a zonal one.
	Region string
	// Name is the MIG name.
	Name string
	// Templates are the instance templates the MIG references
	// (instanceTemplate and versions[].instanceTemplate), deduplicated, as
	// relative paths "projects/P/global/instanceTemplates/NAME" (or
	// ".../regions/R/instanceTemplates/NAME").
	Templates []string
	// TargetSize is the MIG's target size.
	TargetSize int32
	// Description is the MIG's description: a request MIG's names its
	// request, pool and cluster (shared/naming RequestMIGDescription).
	Description string
}

// Scope is "zones/Z" or "regions/R".
func (m MIGRef) Scope() string {
	if m.Region != "" {
		return "regions/" + m.Region
	}
	return "zones/" + m.Zone
}

// UnreachableError reports scopes an aggregated list could not read: what
// they hold is unknown.
type UnreachableError struct {
	// What is the listing, e.g. "instances".
	What string
	// Scopes are the unreachable scopes or resources, as Compute names them.
	Scopes []string
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("listing %s: unreachable: %s", e.What, strings.Join(e.Scopes, ", "))
}

// relPath turns a resource URL into its "projects/…" relative path.
func relPath(s string) string {
	if i := strings.Index(s, "projects/"); i >= 0 {
		return s[i:]
	}
	return s
}

// unreachableWarning reports whether a scoped list's warning says the scope
// could not be read.
func unreachableWarning(w *computepb.Warning) bool {
	return w.GetCode() == computepb.Warning_UNREACHABLE.String()
}

// ListInstancesAllZones returns the project's VMs in every zone carrying
// every label in labels (all VMs if labels is empty), filtered server-side
// with one parenthesized expression per label (the discovery document's
// form for several expressions) and checked again here on every VM, as
// ListInstances does and for the same reason, ordered by zone and name,
// following every page. If a scope could not be read the error is an
// *UnreachableError and the VMs that were read are returned with it.
func (c *Client) ListInstancesAllZones(ctx context.Context, labels map[string]string) ([]Instance, error) {
	req := &computepb.AggregatedListInstancesRequest{Project: c.project}
	if len(labels) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			parts = append(parts, fmt.Sprintf("(labels.%s = %q)", k, labels[k]))
		}
		req.Filter = proto.String(strings.Join(parts, " "))
	}
	it := c.instances.AggregatedList(ctx, req)
	var out []Instance
	unreachable := map[string]bool{}
	for {
		p, err := it.Next()
		if resp, ok := it.Response.(*computepb.InstanceAggregatedList); ok {
			for _, u := range resp.GetUnreachables() {
				unreachable[u] = true
			}
		}
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing instances in every zone: %w", mark(err))
		}
		if unreachableWarning(p.Value.GetWarning()) {
			unreachable[p.Key] = true
		}
		for _, pb := range p.Value.GetInstances() {
			in := toInstance(lastSegment(p.Key), pb)
			if hasLabels(in.Labels, labels) {
				out = append(out, in)
			}
		}
	}
	slices.SortFunc(out, func(a, b Instance) int {
		return strings.Compare(a.Zone+"/"+a.Name, b.Zone+"/"+b.Name)
	})
	if len(unreachable) > 0 {
		return out, &UnreachableError{What: "instances", Scopes: slices.Sorted(maps.Keys(unreachable))}
	}
	return out, nil
}

// hasLabels reports whether have carries every label of want with its
// value: the client-side check after every server-side label filter.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ListMIGsAllScopes returns every managed instance group of the project,
// zonal and regional, ordered by scope and name, following every page. If a
// scope could not be read the error is an *UnreachableError and the MIGs
// that were read are returned with it.
func (c *Client) ListMIGsAllScopes(ctx context.Context) ([]MIGRef, error) {
	it := c.migs.AggregatedList(ctx, &computepb.AggregatedListInstanceGroupManagersRequest{Project: c.project})
	var out []MIGRef
	unreachable := map[string]bool{}
	for {
		p, err := it.Next()
		if resp, ok := it.Response.(*computepb.InstanceGroupManagerAggregatedList); ok {
			for _, u := range resp.GetUnreachables() {
				unreachable[u] = true
			}
		}
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing managed instance groups in every zone and region: %w", mark(err))
		}
		if unreachableWarning(p.Value.GetWarning()) {
			unreachable[p.Key] = true
		}
		for _, m := range p.Value.GetInstanceGroupManagers() {
			r := MIGRef{Name: m.GetName(), TargetSize: m.GetTargetSize(), Description: m.GetDescription()}
			switch {
			case m.GetZone() != "":
				r.Zone = lastSegment(m.GetZone())
			case m.GetRegion() != "":
				r.Region = lastSegment(m.GetRegion())
			case strings.HasPrefix(p.Key, "regions/"):
				r.Region = lastSegment(p.Key)
			default:
				r.Zone = lastSegment(p.Key)
			}
			refs := []string{m.GetInstanceTemplate()}
			for _, v := range m.GetVersions() {
				refs = append(refs, v.GetInstanceTemplate())
			}
			for _, t := range refs {
				if t != "" && !slices.Contains(r.Templates, relPath(t)) {
					r.Templates = append(r.Templates, relPath(t))
				}
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b MIGRef) int {
		return strings.Compare(a.Scope()+"/"+a.Name, b.Scope()+"/"+b.Name)
	})
	if len(unreachable) > 0 {
		return out, &UnreachableError{What: "managed instance groups", Scopes: slices.Sorted(maps.Keys(unreachable))}
	}
	return out, nil
}

// ListInstanceTemplates returns every global instance template of the
// project, ordered by name, following every page.
func (c *Client) ListInstanceTemplates(ctx context.Context) ([]InstanceTemplate, error) {
	it := c.templates.List(ctx, &computepb.ListInstanceTemplatesRequest{Project: c.project})
	var out []InstanceTemplate
	for {
		t, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing instance templates: %w", mark(err))
		}
		out = append(out, InstanceTemplate{
			Name:    t.GetName(),
			Path:    "projects/" + c.project + "/global/instanceTemplates/" + t.GetName(),
			Labels:  t.GetProperties().GetLabels(),
			Created: parseTime(t.GetCreationTimestamp()),
		})
	}
	slices.SortFunc(out, func(a, b InstanceTemplate) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteInstanceTemplate deletes a global instance template. A template that
// does not exist (404) counts as success. Compute refuses to delete a
// template a MIG still uses (instanceTemplates.delete: "It is not possible to
// delete templates that are already in use by a managed instance group").
func (c *Client) DeleteInstanceTemplate(ctx context.Context, name, requestID string) error {
	if err := checkName("instance template", name); err != nil {
		return fmt.Errorf("deleting instance template: %w", err)
	}
	err := wait(ctx)(c.templates.Delete(ctx, &computepb.DeleteInstanceTemplateRequest{
		Project:          c.project,
		InstanceTemplate: name,
		RequestId:        optRequestID(requestID),
	}))
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("deleting instance template %s: %w", name, mark(err))
	}
	return nil
}

// DeleteInstance deletes a VM that is not in a MIG (a MIG would recreate a
// member deleted this way; use DeleteInstances or DeleteMIG for those). A VM
// that does not exist (404) counts as success; one already being deleted
// answers an error for which IsNotReady is true.
func (c *Client) DeleteInstance(ctx context.Context, zone, name, requestID string) error {
	if err := checkName("instance", name); err != nil {
		return fmt.Errorf("deleting instance: %w", err)
	}
	err := wait(ctx)(c.instances.Delete(ctx, &computepb.DeleteInstanceRequest{
		Project:   c.project,
		Zone:      zone,
		Instance:  name,
		RequestId: optRequestID(requestID),
	}))
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("deleting instance %s in %s: %w", name, zone, mark(err))
	}
	return nil
}
