package tracebench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// countingCompute counts the calls flexslurm makes at the apply.Compute
// port, by method.
type countingCompute struct {
	inner apply.Compute
	mu    sync.Mutex
	calls map[string]int
}

var _ apply.Compute = (*countingCompute)(nil)

func (c *countingCompute) count(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[method]++
}

func (c *countingCompute) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

func (c *countingCompute) EnsureInstanceTemplate(ctx context.Context, t instancetemplate.Template, requestID string) error {
	c.count("EnsureInstanceTemplate")
	return c.inner.EnsureInstanceTemplate(ctx, t, requestID)
}

func (c *countingCompute) EnsureMIG(ctx context.Context, m gce.MIGSpec, requestID string) error {
	c.count("EnsureMIG")
	return c.inner.EnsureMIG(ctx, m, requestID)
}

func (c *countingCompute) CreateResizeRequest(ctx context.Context, zone, mig string, rr gce.ResizeRequestSpec, requestID string) error {
	c.count("CreateResizeRequest")
	return c.inner.CreateResizeRequest(ctx, zone, mig, rr, requestID)
}

func (c *countingCompute) CancelResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	c.count("CancelResizeRequest")
	return c.inner.CancelResizeRequest(ctx, zone, mig, name, requestID)
}

func (c *countingCompute) DeleteResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	c.count("DeleteResizeRequest")
	return c.inner.DeleteResizeRequest(ctx, zone, mig, name, requestID)
}

func (c *countingCompute) DeleteInstances(ctx context.Context, zone, mig string, names []string, requestID string) error {
	c.count("DeleteInstances")
	return c.inner.DeleteInstances(ctx, zone, mig, names, requestID)
}

func (c *countingCompute) ListInstances(ctx context.Context, zone string, labels map[string]string) ([]gce.Instance, error) {
	c.count("ListInstances")
	return c.inner.ListInstances(ctx, zone, labels)
}

func (c *countingCompute) ListResizeRequests(ctx context.Context, zone, mig string) ([]gce.ResizeRequest, error) {
	c.count("ListResizeRequests")
	return c.inner.ListResizeRequests(ctx, zone, mig)
}

func (c *countingCompute) ListMIGs(ctx context.Context, zone, namePrefix string) ([]gce.MIG, error) {
	c.count("ListMIGs")
	return c.inner.ListMIGs(ctx, zone, namePrefix)
}

func (c *countingCompute) GetInstance(ctx context.Context, zone, name string) (gce.Instance, error) {
	c.count("GetInstance")
	return c.inner.GetInstance(ctx, zone, name)
}

func (c *countingCompute) DeleteMIG(ctx context.Context, zone, name, requestID string) error {
	c.count("DeleteMIG")
	return c.inner.DeleteMIG(ctx, zone, name, requestID)
}

func (c *countingCompute) ReportHostAsFaulty(ctx context.Context, zone, name, behavior, description, requestID string) error {
	c.count("ReportHostAsFaulty")
	return c.inner.ReportHostAsFaulty(ctx, zone, name, behavior, description, requestID)
}

func (c *countingCompute) StartInstance(ctx context.Context, zone, name, requestID string) error {
	c.count("StartInstance")
	return c.inner.StartInstance(ctx, zone, name, requestID)
}

func (c *countingCompute) EnsureWorkloadPolicy(ctx context.Context, w gce.WorkloadPolicySpec, requestID string) error {
	c.count("EnsureWorkloadPolicy")
	return c.inner.EnsureWorkloadPolicy(ctx, w, requestID)
}

// countingStore counts the store operations the functions make: Update
// (one Firestore transaction each) and Read (a read outside one).
type countingStore struct {
	inner          store.Store
	updates, reads atomic.Int64
}

var _ store.Store = (*countingStore)(nil)

func (s *countingStore) Update(ctx context.Context, scope store.Scope, fn func(st *model.State) error) error {
	s.updates.Add(1)
	return s.inner.Update(ctx, scope, fn)
}

func (s *countingStore) Read(ctx context.Context, scope store.Scope) (*model.State, error) {
	s.reads.Add(1)
	return s.inner.Read(ctx, scope)
}

func (s *countingStore) Clusters(ctx context.Context) ([]string, error) { return s.inner.Clusters(ctx) }

func (s *countingStore) ForgetEvents(ctx context.Context, cluster string, before time.Time) (int, error) {
	return s.inner.ForgetEvents(ctx, cluster, before)
}
