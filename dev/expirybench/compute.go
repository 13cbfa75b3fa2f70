package expirybench

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
)

// readCache answers a Compute read (list or get) with the answer the same
// call got last, as long as nothing changed in the simulator since: each
// answer is kept with the simulator's state fingerprint (every VM's name,
// id, status and termination, every resize request's name, state and
// error, every MIG's target size, read directly from the simulator) and
// used only while the fingerprint is unchanged; a mutating call drops every
// answer. The first read after a change goes through the apiv1 adapter to
// the simulator, so flexslurm sees exactly what it would without the cache,
// and a reconcile pass on a quiet pool costs no HTTP round trip. It is safe
// for concurrent use.
type readCache struct {
	inner       apply.Compute
	fingerprint func() string

	mu      sync.Mutex
	answers map[string]cached
}

type cached struct {
	fingerprint string
	answer      any
}

var _ apply.Compute = (*readCache)(nil)

func newReadCache(fingerprint func() string) *readCache {
	return &readCache{fingerprint: fingerprint, answers: map[string]cached{}}
}

// invalidate drops every answer.
func (c *readCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.answers)
}

// get returns the kept answer for key if the simulator's state is still the
// one it was read in, and the current fingerprint to keep a new answer with.
func (c *readCache) get(key string) (answer any, ok bool, fp string) {
	fp = c.fingerprint()
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.answers[key]; ok && v.fingerprint == fp {
		return v.answer, true, fp
	}
	return nil, false, fp
}

// put keeps an answer read in the state fp, unless a mutation dropped the
// answers meanwhile (then fp may predate it; the next read goes through).
func (c *readCache) put(key, fp string, v any) {
	if c.fingerprint() != fp {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers[key] = cached{fingerprint: fp, answer: v}
}

// mutate runs a mutating call, dropping every answer before and after it.
func (c *readCache) mutate(call func() error) error {
	c.invalidate()
	defer c.invalidate()
	return call()
}

func cloneInstances(in []gce.Instance) []gce.Instance {
	out := slices.Clone(in)
	for i := range out {
		out[i].Labels = maps.Clone(out[i].Labels)
	}
	return out
}

func cloneResizeRequests(in []gce.ResizeRequest) []gce.ResizeRequest {
	out := slices.Clone(in)
	for i := range out {
		out[i].Instances = slices.Clone(out[i].Instances)
	}
	return out
}

// ListInstances implements apply.Compute.
func (c *readCache) ListInstances(ctx context.Context, zone string, labels map[string]string) ([]gce.Instance, error) {
	keys := make([]string, 0, len(labels))
	for k, v := range labels {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	key := "instances\x00" + zone + "\x00" + strings.Join(keys, ",")
	v, ok, fp := c.get(key)
	if ok {
		return cloneInstances(v.([]gce.Instance)), nil
	}
	out, err := c.inner.ListInstances(ctx, zone, labels)
	if err == nil {
		c.put(key, fp, cloneInstances(out))
	}
	return out, err
}

// ListResizeRequests implements apply.Compute.
func (c *readCache) ListResizeRequests(ctx context.Context, zone, mig string) ([]gce.ResizeRequest, error) {
	key := "resize-requests\x00" + zone + "\x00" + mig
	v, ok, fp := c.get(key)
	if ok {
		return cloneResizeRequests(v.([]gce.ResizeRequest)), nil
	}
	out, err := c.inner.ListResizeRequests(ctx, zone, mig)
	if err == nil {
		c.put(key, fp, cloneResizeRequests(out))
	}
	return out, err
}

// ListMIGs implements apply.Compute.
func (c *readCache) ListMIGs(ctx context.Context, zone, namePrefix string) ([]gce.MIG, error) {
	key := "migs\x00" + zone + "\x00" + namePrefix
	v, ok, fp := c.get(key)
	if ok {
		return slices.Clone(v.([]gce.MIG)), nil
	}
	out, err := c.inner.ListMIGs(ctx, zone, namePrefix)
	if err == nil {
		c.put(key, fp, slices.Clone(out))
	}
	return out, err
}

// GetInstance implements apply.Compute.
func (c *readCache) GetInstance(ctx context.Context, zone, name string) (gce.Instance, error) {
	key := "instance\x00" + zone + "\x00" + name
	v, ok, fp := c.get(key)
	if ok {
		in := v.(gce.Instance)
		in.Labels = maps.Clone(in.Labels)
		return in, nil
	}
	out, err := c.inner.GetInstance(ctx, zone, name)
	if err == nil {
		cp := out
		cp.Labels = maps.Clone(out.Labels)
		c.put(key, fp, cp)
	}
	return out, err
}

// EnsureInstanceTemplate implements apply.Compute.
func (c *readCache) EnsureInstanceTemplate(ctx context.Context, t instancetemplate.Template, requestID string) error {
	return c.mutate(func() error { return c.inner.EnsureInstanceTemplate(ctx, t, requestID) })
}

// EnsureMIG implements apply.Compute.
func (c *readCache) EnsureMIG(ctx context.Context, m gce.MIGSpec, requestID string) error {
	return c.mutate(func() error { return c.inner.EnsureMIG(ctx, m, requestID) })
}

// CreateResizeRequest implements apply.Compute.
func (c *readCache) CreateResizeRequest(ctx context.Context, zone, mig string, rr gce.ResizeRequestSpec, requestID string) error {
	return c.mutate(func() error { return c.inner.CreateResizeRequest(ctx, zone, mig, rr, requestID) })
}

// CancelResizeRequest implements apply.Compute.
func (c *readCache) CancelResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	return c.mutate(func() error { return c.inner.CancelResizeRequest(ctx, zone, mig, name, requestID) })
}

// DeleteResizeRequest implements apply.Compute.
func (c *readCache) DeleteResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	return c.mutate(func() error { return c.inner.DeleteResizeRequest(ctx, zone, mig, name, requestID) })
}

// DeleteInstances implements apply.Compute.
func (c *readCache) DeleteInstances(ctx context.Context, zone, mig string, names []string, requestID string) error {
	return c.mutate(func() error { return c.inner.DeleteInstances(ctx, zone, mig, names, requestID) })
}

// DeleteMIG implements apply.Compute.
func (c *readCache) DeleteMIG(ctx context.Context, zone, name, requestID string) error {
	return c.mutate(func() error { return c.inner.DeleteMIG(ctx, zone, name, requestID) })
}

// ReportHostAsFaulty implements apply.Compute.
func (c *readCache) ReportHostAsFaulty(ctx context.Context, zone, name, behavior, description, requestID string) error {
	return c.mutate(func() error { return c.inner.ReportHostAsFaulty(ctx, zone, name, behavior, description, requestID) })
}

// StartInstance implements apply.Compute.
func (c *readCache) StartInstance(ctx context.Context, zone, name, requestID string) error {
	return c.mutate(func() error { return c.inner.StartInstance(ctx, zone, name, requestID) })
}

// EnsureWorkloadPolicy implements apply.Compute.
func (c *readCache) EnsureWorkloadPolicy(ctx context.Context, w gce.WorkloadPolicySpec, requestID string) error {
	return c.mutate(func() error { return c.inner.EnsureWorkloadPolicy(ctx, w, requestID) })
}
