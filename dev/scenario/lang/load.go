package lang

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// MaxFileBytes bounds a scenario file.
const MaxFileBytes = 4 << 20

// Load reads and validates a scenario file. Errors name the file, the key
// path and the line.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.path = path
	if err := f.resolveCluster(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse decodes and validates a scenario. Unknown keys are rejected with
// their path and line. A cluster given by path is resolved relative to the
// working directory (Load resolves it relative to the file).
func Parse(data []byte) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("scenario is %d bytes, above the %d-byte limit", len(data), MaxFileBytes)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	if len(root.Content) == 0 {
		return nil, errors.New("empty scenario")
	}
	if err := checkKnownKeys(root.Content[0], reflect.TypeOf(File{}), ""); err != nil {
		return nil, err
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decoding scenario: %w", err)
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Marshal writes f as a scenario file that Parse reads back.
func Marshal(f *File) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encoding scenario: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding scenario: %w", err)
	}
	return b.Bytes(), nil
}

var (
	leafType = reflect.TypeOf((*leaf)(nil)).Elem()
)

// checkKnownKeys walks a YAML node beside the Go type it decodes into and
// reports every mapping key the type does not have, with its path and line.
func checkKnownKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return checkKnownKeys(n.Alias, t, path)
	}
	if t.Implements(leafType) || reflect.PointerTo(t).Implements(leafType) {
		return nil
	}
	var errs []error
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil // the decoder reports the type mismatch
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				continue
			}
			p := joinPath(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				errs = append(errs, fmt.Errorf("%s (line %d): unknown key %q; known keys here: %s", p, k.Line, k.Value, strings.Join(sortedKeys(fields), ", ")))
				continue
			}
			if err := checkKnownKeys(v, ft, p); err != nil {
				errs = append(errs, err)
			}
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				if err := checkKnownKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					errs = append(errs, err)
				}
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := checkKnownKeys(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value)); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// yamlFields maps the YAML keys of a struct type (inline structs flattened)
// to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// problems collects validation errors.
type problems []string

func (p *problems) add(line int, path, format string, args ...any) {
	loc := path
	if line > 0 {
		loc = fmt.Sprintf("%s (line %d)", path, line)
	}
	*p = append(*p, loc+": "+fmt.Sprintf(format, args...))
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%d problem(s):\n  %s", len(p), strings.Join(p, "\n  "))
}

// Topics a scenario can publish to or select, and the payload types.
var (
	knownTopics = []string{config.TopicJobs, config.TopicClusterSpec, config.TopicExpiry,
		config.TopicHealthFailure, config.TopicReconcile, config.TopicSlurmSnapshot}
	jobTypes   = map[string]string{"pending": event.TypeJobPending, "started": event.TypeJobStarted, "finished": event.TypeJobFinished, "cancelled": event.TypeJobCancelled}
	powerTypes = map[string]string{"suspend": event.TypeNodeSuspend, "resume_failed": event.TypeResumeFailed}
	counters   = []string{"compute_calls", "resize_requests_created", "deliveries", "acks", "nacks", "redeliveries", "duplicates", "dead_letters", "injected_errors"}
	invariants = []string{"one_vm_per_node", "one_request_per_node", "no_unrecorded_vm", "static_at_min", "no_idle_dynamic_vm", "repair_progress",
		"foreign_untouched", "foreign_reservations_untouched", "within_max", "no_dead_letters", "quiet", "no_mig_left", "own_drain_followed", "arrived_capacity_kept"}
	rrStates = []string{"CREATING", "ACCEPTED", "SUCCEEDED", "FAILED", "CANCELLED", "active"}
)

func (f *File) validate() error {
	var p problems
	if strings.TrimSpace(f.Name) == "" {
		p.add(0, "name", "required")
	}
	if f.Cluster.IsZero() {
		p.add(0, "cluster", "required: a path to a cluster_config.json or the spec inline")
	}
	if f.Start != "" {
		if _, err := time.Parse(time.RFC3339, f.Start); err != nil {
			p.add(0, "start", "want an RFC 3339 time: %v", err)
		}
	}
	switch f.Simulator.ExpiryLogStyle {
	case "", "deferredDelete", "migDelete":
	default:
		p.add(0, "simulator.expiry_log_style", "want deferredDelete or migDelete, got %q", f.Simulator.ExpiryLogStyle)
	}
	if _, err := computesim.ParseReadings(f.Simulator.ComputeReadings); err != nil {
		p.add(0, "simulator.compute_readings", "%v", err)
	}
	if f.Delivery.MaxAttempts < 0 {
		p.add(0, "delivery.max_attempts", "must be ≥ 1")
	}
	if rf := f.RandomFaults; rf != nil {
		for name, v := range map[string]float64{"duplicate": rf.Duplicate, "delay": rf.Delay, "crash": rf.Crash} {
			if v < 0 || v > 1 {
				p.add(0, "random_faults."+name, "a probability must be within 0–1, got %v", v)
			}
		}
		for i, t := range rf.DelayTopics {
			if !contains(knownTopics, t) {
				p.add(0, fmt.Sprintf("random_faults.delay_topics[%d]", i), "unknown topic %q; topics: %s", t, strings.Join(knownTopics, ", "))
			}
		}
	}
	for i, n := range f.Initial.Nodes {
		var rec model.Node
		if err := StrictJSON(n, &rec); err != nil {
			p.add(0, fmt.Sprintf("initial.nodes[%d]", i), "%v", err)
		} else if rec.Name == "" || rec.Pool == "" {
			p.add(0, fmt.Sprintf("initial.nodes[%d]", i), "name and pool are required")
		}
	}
	for i, j := range f.Initial.Jobs {
		var rec model.Job
		if err := StrictJSON(j, &rec); err != nil {
			p.add(0, fmt.Sprintf("initial.jobs[%d]", i), "%v", err)
		} else if rec.ID == "" {
			p.add(0, fmt.Sprintf("initial.jobs[%d]", i), "id is required")
		}
	}
	for i, v := range f.Initial.ForeignVMs {
		if v.Name == "" {
			p.add(0, fmt.Sprintf("initial.foreign_vms[%d].name", i), "required")
		}
	}
	if f.Invariants.IdleDynamicReleased != nil && !f.Slurm.Simulate {
		p.add(0, "invariants.idle_dynamic_released", "needs slurm.simulate: idleness is Slurm's")
	}
	var last time.Duration
	for i, s := range f.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		at := stepAt(s.At, last)
		if at < last {
			p.add(s.line, path+".at", "%s is before the previous step's time %s: steps are in time order (use +offset for relative times)", FormatDuration(at), FormatDuration(last))
		}
		last = max(last, at)
		s.validate(&p, path, f)
		if s.Advance != nil {
			last += s.Advance.D()
		}
	}
	if f.End != nil && f.End.D() < last {
		p.add(0, "end", "%s is before the last step's time %s", FormatDuration(f.End.D()), FormatDuration(last))
	}
	for i, c := range f.Final {
		c.validate(&p, fmt.Sprintf("final[%d]", i), f)
	}
	return p.err()
}

// StrictJSON decodes a JSON record, refusing unknown fields (initial
// records are model.Node and model.Job values).
func StrictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// actions lists a step's actions by key.
func (s *Step) actions() []string {
	var out []string
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch name {
		case "", "at", "label", "delivery":
			continue
		}
		fv := v.Field(i)
		if (fv.Kind() == reflect.Pointer && !fv.IsNil()) || (fv.Kind() == reflect.Slice && fv.Len() > 0) {
			out = append(out, name)
		}
	}
	return out
}

// publishes reports whether a step publishes one message (so that label and
// delivery apply to it).
func (s *Step) publishes() bool {
	return s.Apply != nil || s.Job != nil || s.Health != nil || s.Power != nil || s.Snapshot != nil || s.Tick != nil
}

func (s *Step) validate(p *problems, path string, f *File) {
	acts := s.actions()
	switch len(acts) {
	case 0:
		p.add(s.line, path, "a step needs one action (apply, job, health, power, snapshot, tick, advance, expire, delete_vm, delete_mig, fail_resize_request, capacity, submit, cancel, deliveries, duplicate, release, crash, compute_error, list_omit, shortage, late_decision, assert, always)")
		return
	case 1:
	default:
		p.add(s.line, path, "a step has one action; this one has %s", strings.Join(acts, ", "))
		return
	}
	if (s.Label != "" || s.Delivery != nil) && !s.publishes() {
		p.add(s.line, path, "label and delivery apply to a step that publishes a message (apply, job, health, power, snapshot, tick)")
	}
	if s.Delivery != nil {
		s.Delivery.validate(p, s.line, path+".delivery")
	}
	switch {
	case s.Job != nil:
		j := s.Job
		if _, ok := jobTypes[j.Type]; !ok {
			p.add(s.line, path+".job.type", "want pending, started, finished or cancelled, got %q", j.Type)
		}
		if j.ID == "" {
			p.add(s.line, path+".job.id", "required")
		}
		if j.Type == "pending" && j.Count == 0 && len(j.Nodes) == 0 {
			p.add(s.line, path+".job", "a pending job needs count or nodes")
		}
	case s.Health != nil:
		if s.Health.Node == "" {
			p.add(s.line, path+".health.node", "required")
		}
		switch s.Health.Verdict {
		case "", event.VerdictFail:
		case event.VerdictInconclusive:
			if s.Health.Drained != nil && *s.Health.Drained {
				p.add(s.line, path+".health.drained", "only a FAIL reports the node drained")
			}
		default:
			p.add(s.line, path+".health.verdict", "want FAIL or INCONCLUSIVE, got %q", s.Health.Verdict)
		}
	case s.Power != nil:
		if _, ok := powerTypes[s.Power.Type]; !ok {
			p.add(s.line, path+".power.type", "want suspend or resume_failed, got %q", s.Power.Type)
		}
		if len(s.Power.Nodes) == 0 {
			p.add(s.line, path+".power.nodes", "required")
		}
	case s.Snapshot != nil:
		for i, n := range s.Snapshot.Nodes {
			if n.Name == "" {
				p.add(s.line, fmt.Sprintf("%s.snapshot.nodes[%d].name", path, i), "required")
			}
			if _, _, err := ParseSlurmState(n.State); err != nil {
				p.add(s.line, fmt.Sprintf("%s.snapshot.nodes[%d].state", path, i), "%v", err)
			}
		}
		for i, j := range s.Snapshot.Jobs {
			if j.ID == "" || j.State == "" {
				p.add(s.line, fmt.Sprintf("%s.snapshot.jobs[%d]", path, i), "id and state are required")
			}
		}
	case s.Expire != nil:
		s.Expire.validate(p, s.line, path+".expire")
	case s.DeleteVM != nil:
		s.DeleteVM.validate(p, s.line, path+".delete_vm")
	case s.DeleteMIG != nil:
		if s.DeleteMIG.Pool == "" {
			p.add(s.line, path+".delete_mig.pool", "required")
		}
	case s.FailResizeRequest != nil:
		fr := s.FailResizeRequest
		if fr.Name == "" && fr.Match == "" && fr.Node == "" {
			p.add(s.line, path+".fail_resize_request", "name, match or node is required")
		}
		checkRegexp(p, s.line, path+".fail_resize_request.match", fr.Match)
	case s.Submit != nil:
		if !f.Slurm.Simulate {
			p.add(s.line, path+".submit", "needs slurm.simulate")
		}
		if s.Submit.ID == "" || s.Submit.Nodes < 1 {
			p.add(s.line, path+".submit", "id and nodes ≥ 1 are required")
		}
		if s.Submit.GPUs < 0 {
			p.add(s.line, path+".submit.gpus", "%d: at least 0", s.Submit.GPUs)
		}
		if strings.ContainsAny(s.Submit.Comment, "\n\r") {
			p.add(s.line, path+".submit.comment", "%q: one line, as sbatch --comment takes it", s.Submit.Comment)
		}
	case s.Cancel != nil:
		if !f.Slurm.Simulate {
			p.add(s.line, path+".cancel", "needs slurm.simulate")
		}
		if s.Cancel.ID == "" {
			p.add(s.line, path+".cancel.id", "required")
		}
	case s.Deliveries != nil:
		r := s.Deliveries
		if r.Topic != "" && !contains(knownTopics, r.Topic) {
			p.add(s.line, path+".deliveries.topic", "unknown topic %q; topics: %s", r.Topic, strings.Join(knownTopics, ", "))
		}
		checkRegexp(p, s.line, path+".deliveries.vm", r.VM)
		r.DeliveryFaults.validate(p, s.line, path+".deliveries")
	case s.Duplicate != nil:
		if s.Duplicate.Label == "" {
			p.add(s.line, path+".duplicate.label", "required")
		}
	case s.Release != nil:
		if s.Release.Hold == "" {
			p.add(s.line, path+".release.hold", "required")
		}
		switch s.Release.Order {
		case "", "held", "reverse", "shuffle":
		default:
			p.add(s.line, path+".release.order", "want held, reverse or shuffle, got %q", s.Release.Order)
		}
	case s.Crash != nil:
		if _, err := ParseCrashPoint(s.Crash.Point); err != nil {
			p.add(s.line, path+".crash.point", "%v", err)
		}
		if s.Crash.Topic != "" && !contains(knownTopics, s.Crash.Topic) {
			p.add(s.line, path+".crash.topic", "unknown topic %q", s.Crash.Topic)
		}
	case s.ComputeError != nil:
		ce := s.ComputeError
		checkRegexp(p, s.line, path+".compute_error.path", ce.Path)
		checkRegexp(p, s.line, path+".compute_error.body", ce.Body)
		switch strings.ToUpper(ce.Method) {
		case "", "GET", "POST", "DELETE", "PATCH":
		default:
			p.add(s.line, path+".compute_error.method", "want GET, POST, DELETE or PATCH")
		}
		if ce.Status != 0 && (ce.Status < 400 || ce.Status > 599) {
			p.add(s.line, path+".compute_error.status", "want an HTTP error status (400–599)")
		}
		if ce.Times < 0 {
			p.add(s.line, path+".compute_error.times", "must be ≥ 0")
		}
	case s.ListOmit != nil:
		lo := s.ListOmit
		if lo.VM == "" {
			p.add(s.line, path+".list_omit.vm", "required")
		}
		checkRegexp(p, s.line, path+".list_omit.vm", lo.VM)
		if lo.Times < 0 {
			p.add(s.line, path+".list_omit.times", "must be ≥ 0")
		}
		if strings.HasPrefix(lo.Field, ".") || strings.HasSuffix(lo.Field, ".") || strings.Contains(lo.Field, "..") || lo.Field == "name" {
			p.add(s.line, path+".list_omit.field", "want a field such as status or scheduling.terminationTimestamp (not name), got %q", lo.Field)
		}
	case s.LateDecision != nil:
		if s.LateDecision.Lag.D() <= 0 {
			p.add(s.line, path+".late_decision.lag", "required: a duration > 0, got %s", FormatDuration(s.LateDecision.Lag.D()))
		}
		if s.LateDecision.For.D() < 0 {
			p.add(s.line, path+".late_decision.for", "must be ≥ 0")
		}
	case s.Shortage != nil:
		if sh := s.Shortage; sh.Code != "" && !contains(ShortageCodes, sh.Code) {
			p.add(s.line, path+".shortage.code", "unknown code %q; codes: %s", sh.Code, strings.Join(ShortageCodes, ", "))
		}
		if s.Shortage.Limit < 0 {
			p.add(s.line, path+".shortage.limit", "must be ≥ 0")
		}
	case len(s.Assert) > 0:
		for i, c := range s.Assert {
			c.validate(p, fmt.Sprintf("%s.assert[%d]", path, i), f)
		}
	case s.Always != nil:
		if len(s.Always.Checks) == 0 {
			p.add(s.line, path+".always.checks", "required")
		}
		for i, c := range s.Always.Checks {
			c.validate(p, fmt.Sprintf("%s.always.checks[%d]", path, i), f)
		}
	}
}

func (d *DeliveryFaults) validate(p *problems, line int, path string) {
	if (d.RedeliverEvery == 0) != (d.RedeliverFor == 0) {
		p.add(line, path, "redeliver_every and redeliver_for go together")
	}
	for i, c := range d.Crash {
		if _, err := ParseCrashPoint(c); err != nil {
			p.add(line, fmt.Sprintf("%s.crash[%d]", path, i), "%v", err)
		}
	}
}

func (v *VMRef) validate(p *problems, line int, path string) {
	if (v.VM == "") == (v.Node == "") {
		p.add(line, path, "exactly one of vm and node")
	}
}

func (c *Check) validate(p *problems, path string, f *File) {
	line := c.line
	n := 0
	if c.VMs != nil {
		n++
		checkCount(p, line, path+".vms", c.VMs.Count)
		if v := c.VMs; v.Names == nil && !v.Count.IsSet() && v.BootDiskSizeGB == 0 && !v.PoolTemplate && v.EndBy == nil && v.EndAfter == nil {
			// pool, node, include_stopping and foreign only select.
			p.add(line, path+".vms", "selects VMs but checks nothing: give names, count, min, max, boot_disk_size_gb, pool_template, end_by or end_after")
		}
	}
	if c.ResizeRequests != nil {
		n++
		rr := c.ResizeRequests
		checkRegexp(p, line, path+".resize_requests.match", rr.Match)
		checkCount(p, line, path+".resize_requests", rr.Count)
		if rr.Names == nil && !rr.Count.IsSet() && len(rr.States) == 0 && len(rr.WorkloadPolicies) == 0 {
			// name, match, node, job and state only select.
			p.add(line, path+".resize_requests", "selects resize requests but checks nothing: give names, count, min, max, states or workload_policies")
		}
		for _, s := range rr.State {
			if !contains(rrStates, s) {
				p.add(line, path+".resize_requests.state", "unknown state %q; states: %s", s, strings.Join(rrStates, ", "))
			}
		}
		for name, s := range rr.States {
			if !contains(rrStates, s) || s == "active" {
				p.add(line, path+".resize_requests.states."+name, "unknown state %q", s)
			}
		}
	}
	if c.SlurmCommands != nil {
		n++
		checkCount(p, line, path+".slurm_commands", c.SlurmCommands.Count)
	}
	if c.Counter != nil {
		n++
		cc := c.Counter
		if !contains(counters, cc.Counter) {
			p.add(line, path+".counter.counter", "unknown counter %q; counters: %s", cc.Counter, strings.Join(counters, ", "))
		}
		checkRegexp(p, line, path+".counter.path", cc.Path)
		checkRegexp(p, line, path+".counter.body", cc.Body)
		checkRegexp(p, line, path+".counter.match", cc.Match)
		switch cc.Outcome {
		case "", "any", "ok", "error", "injected":
		default:
			p.add(line, path+".counter.outcome", "want any, ok, error or injected")
		}
		if cc.Count == (Count{}) && cc.PerHourMax == nil {
			p.add(line, path+".counter", "count, min, max or per_hour_max is required")
		}
		checkCount(p, line, path+".counter", cc.Count)
	}
	for i, nc := range c.Nodes {
		n++
		if nc.Name == "" {
			p.add(line, fmt.Sprintf("%s.nodes[%d].name", path, i), "required")
		}
		if nc.Phase != "" && !contains(phaseNames(), nc.Phase) {
			p.add(line, fmt.Sprintf("%s.nodes[%d].phase", path, i), "unknown phase %q; phases: %s", nc.Phase, strings.Join(phaseNames(), ", "))
		}
		if nc.Repair != "" && !contains(repairNames(), nc.Repair) {
			p.add(line, fmt.Sprintf("%s.nodes[%d].repair", path, i), "unknown repair state %q; states: %s", nc.Repair, strings.Join(repairNames(), ", "))
		}
	}
	for i, jc := range c.Jobs {
		n++
		if jc.ID == "" {
			p.add(line, fmt.Sprintf("%s.jobs[%d].id", path, i), "required")
		}
	}
	for i, pc := range c.Pools {
		n++
		if pc.ID == "" {
			p.add(line, fmt.Sprintf("%s.pools[%d].id", path, i), "required")
		}
		if pc.Shortage != "" && !contains([]string{"capacity", "quota", "none"}, pc.Shortage) {
			p.add(line, fmt.Sprintf("%s.pools[%d].shortage", path, i), "want capacity, quota or none, got %q", pc.Shortage)
		}
		if pc.Backoff != "" && !contains([]string{"capacity", "quota", "permanent", "none"}, pc.Backoff) {
			p.add(line, fmt.Sprintf("%s.pools[%d].backoff", path, i), "want capacity, quota, permanent or none, got %q", pc.Backoff)
		}
	}
	for i, sn := range c.SlurmNodes {
		n++
		if sn.Name == "" {
			p.add(line, fmt.Sprintf("%s.slurm_nodes[%d].name", path, i), "required")
		}
		if sn.State != "" {
			if _, _, err := ParseSlurmState(sn.State); err != nil {
				p.add(line, fmt.Sprintf("%s.slurm_nodes[%d].state", path, i), "%v", err)
			}
		}
	}
	for i, sj := range c.SlurmJobs {
		n++
		if sj.ID == "" {
			p.add(line, fmt.Sprintf("%s.slurm_jobs[%d].id", path, i), "required")
		}
		if sj.Comment != nil {
			checkRegexp(p, line, fmt.Sprintf("%s.slurm_jobs[%d].comment", path, i), *sj.Comment)
		}
		if !f.Slurm.Simulate {
			p.add(line, fmt.Sprintf("%s.slurm_jobs[%d]", path, i), "needs slurm.simulate")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Readings)) {
		if !computesim.IsReadingSwitch(name) {
			p.add(line, path+".readings", "unknown switch %q; on/off switches: %s", name, strings.Join(computesim.ReadingSwitchNames(), ", "))
		}
	}
	for _, inv := range c.Invariant {
		n++
		if !contains(invariants, inv) {
			p.add(line, path+".invariant", "unknown invariant %q; invariants: %s", inv, strings.Join(invariants, ", "))
		}
		if inv == "no_idle_dynamic_vm" && !f.Slurm.Simulate {
			p.add(line, path+".invariant", "no_idle_dynamic_vm needs slurm.simulate")
		}
	}
	if n == 0 {
		p.add(line, path, "a check needs at least one of vms, nodes, jobs, pools, resize_requests, slurm_commands, slurm_nodes, slurm_jobs, counter, invariant")
	}
}

func checkCount(p *problems, line int, path string, c Count) {
	if c.Count != nil && (c.Min != nil || c.Max != nil) {
		p.add(line, path, "count excludes min and max")
	}
	if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
		p.add(line, path, "min %d is above max %d", *c.Min, *c.Max)
	}
}

func checkRegexp(p *problems, line int, path, re string) {
	if re == "" {
		return
	}
	if _, err := regexp.Compile(re); err != nil {
		p.add(line, path, "not a regular expression: %v", err)
	}
}

func phaseNames() []string {
	out := make([]string, 0, len(model.Phases))
	for _, ph := range model.Phases {
		out = append(out, string(ph))
	}
	return out
}

// repairNames are the repair states of node checks ("none" for no repair).
func repairNames() []string {
	out := make([]string, 0, len(model.RepairStates))
	for _, r := range model.RepairStates {
		out = append(out, RepairName(r))
	}
	return out
}

// RepairName is a repair state as node checks name it ("none" for no
// repair).
func RepairName(r model.RepairState) string {
	if r == model.RepairNone {
		return "none"
	}
	return string(r)
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// resolveCluster makes a relative cluster path relative to the file.
func (f *File) resolveCluster() error {
	resolve := func(c *ClusterRef) {
		if c != nil && c.Path != "" && !filepath.IsAbs(c.Path) && f.path != "" {
			c.Path = filepath.Join(filepath.Dir(f.path), c.Path)
		}
	}
	resolve(&f.Cluster)
	for i := range f.Steps {
		if f.Steps[i].Apply != nil {
			resolve(f.Steps[i].Apply.Cluster)
		}
	}
	_, err := f.Cluster.Load()
	return err
}

// Load parses the spec.
func (c ClusterRef) Load() (*spec.Cluster, error) {
	if len(c.Inline) > 0 {
		cl, err := spec.Parse(c.Inline)
		if err != nil {
			return nil, fmt.Errorf("inline cluster spec: %w", err)
		}
		return cl, nil
	}
	cl, err := spec.Load(c.Path)
	if err != nil {
		return nil, fmt.Errorf("cluster spec %s: %w", c.Path, err)
	}
	return cl, nil
}

// StepTimes returns each step's absolute offset from the start.
func (f *File) StepTimes() []time.Duration {
	out := make([]time.Duration, len(f.Steps))
	var last time.Duration
	for i, s := range f.Steps {
		at := max(stepAt(s.At, last), last)
		out[i] = at
		last = at
		if s.Advance != nil {
			last += s.Advance.D()
		}
	}
	return out
}

// stepAt is a step's time given the previous step's: absolute, relative
// (+offset) or, when omitted, the previous step's.
func stepAt(a *At, last time.Duration) time.Duration {
	switch {
	case a == nil:
		return last
	case a.Relative:
		return last + a.Offset
	}
	return a.Offset
}

// EventType is the event type of a job step's payload.
func (j JobStep) EventType() string { return jobTypes[j.Type] }

// EventType is the event type of a power step's payload.
func (p PowerStep) EventType() string { return powerTypes[p.Type] }

// Path is the file the scenario was loaded from ("" if parsed from bytes).
func (f *File) Path() string { return f.path }
