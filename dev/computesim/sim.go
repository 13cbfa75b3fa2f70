package computesim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/flexslurm/flexslurm/shared/clock"
	"google.golang.org/protobuf/proto"
)

// Sim is the simulator state and its http.Handler. It is safe for concurrent
// use; all state is guarded by one mutex, and hooks and the audit sink run
// outside it.
type Sim struct {
	opts Options
	clk  clock.Clock
	// identity signs the VMs' identity tokens (identity.go).
	identity identityIssuer

	mu sync.Mutex
	// version is Version: it moves when a call that may change the
	// state takes mu (lockForWrite), and when a Tick or a direct list
	// call, which take it with lockQuiet, applies a transition
	// (advanceQuietLocked).
	version   uint64
	rng       *rand.Rand
	seq       uint64          // creation order of every record, for deterministic tie-breaks
	usedIDs   map[uint64]bool // resource and operation IDs handed out
	usedNames map[string]bool // generated names (instance suffixes, insert IDs)
	ipSeq     int
	watermark time.Time // latest instant the state has been brought to
	// zonesOK are the zone names that matched zoneName (serveLocked).
	zonesOK map[string]bool

	templates map[string]*templateRec // key: projects/P/global/instanceTemplates/N
	images    map[string]*imageRec    // key: projects/P/global/images/N (images.go)
	migs      map[string]*migRec      // key: projects/P/zones/Z/instanceGroupManagers/N
	// policies are the resource policies (workload policies only), key
	// projects/P/regions/R/resourcePolicies/N.
	policies  map[string]*computepb.ResourcePolicy
	instances map[string]*instanceRec // key: projects/P/zones/Z/instances/N
	// deletedRRs are the resize requests resizeRequests.delete removed,
	// kept for ResizeRequestHistory (introspection only; the API no
	// longer shows them).
	deletedRRs []*rrRec
	ops        map[string]*computepb.Operation
	reqIDs     map[string]requestRec // key: project|zone|requestId (zone "" for global)

	calls      []Call
	audit      []AuditEntry
	injections []*Injection
	shortages  []Shortage
	effects    []func()

	// lists are the answers of direct list calls (ListShortcut), by path
	// and query, computed at the state of Version listsAt.
	lists   map[string]proto.Message
	listsAt uint64
	// next is the next transition of the state of Version nextAt (none
	// if !nextOK), when nextKnown: nextDueOfStateLocked.
	next              dueItem
	nextOK, nextKnown bool
	nextAt            uint64
}

type templateRec struct {
	seq     uint64
	project string
	pb      *computepb.InstanceTemplate
}

type migRec struct {
	seq                 uint64
	project, zone, name string // zone: a regional MIG's region
	pb                  *computepb.InstanceGroupManager
	templateKey         string
	rrs                 map[string]*rrRec
	// zones are a regional MIG's distributionPolicy zones, in order (nil
	// for a zonal MIG); place is the zone its next VMs are created in
	// (regional.go), "" for m.zone.
	zones []string
	place string
	// policyKey is the workload policy the MIG references ("" for none).
	policyKey string
}

type rrRec struct {
	seq                 uint64
	project, zone, mig  string
	pb                  *computepb.InstanceGroupManagerResizeRequest
	count               int
	names               []string // requested names; nil for resizeBy
	runDuration         time.Duration
	created, acceptAt   time.Time
	capacityAt          time.Time // set when ACCEPTED
	provisionedInstance []string
	deleted             time.Time // when resizeRequests.delete removed it (history only)
	policy              string    // the workload policy of its MIG ("" for none)
}

type deleteCause int

const (
	causeExpiry deleteCause = iota + 1
	causeAPI                // instances.delete
	causeMIG                // MIG deleteInstances, resize down, MIG delete
)

type instanceRec struct {
	seq                 uint64
	project, zone, name string
	pb                  *computepb.Instance
	mig, rr             string
	migLoc              string // the zone (or a regional MIG's region) of its MIG
	template            string // the MIG's template when the VM was created
	created             time.Time
	termination         time.Time // zero: no run-duration limit

	deleteAt        time.Time // non-zero while being deleted (STOPPING)
	deleteCause     deleteCause
	deletePrincipal string
	deleteOpID      string
	callerIP        string // of the instances.delete call, for its audit entry
	userAgent       string
	repairAt        time.Time // non-zero while REPAIRING
	repairOp        string    // key of the running host-repair operation
	host            int
}

type requestRec struct {
	opKey        string
	at           time.Time
	method, path string
}

// requestIDWindow is how long Compute Engine remembers a requestId (the API
// reference: a retried request with the same ID within 60 minutes is ignored).
const requestIDWindow = 60 * time.Minute

// New returns a simulator reading time from clk.
func New(opts Options, clk clock.Clock) *Sim {
	opts = opts.withDefaults()
	return &Sim{
		opts:      opts,
		clk:       clk,
		rng:       rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		usedIDs:   map[uint64]bool{},
		usedNames: map[string]bool{},
		templates: map[string]*templateRec{},
		migs:      map[string]*migRec{},
		policies:  map[string]*computepb.ResourcePolicy{},
		instances: map[string]*instanceRec{},
		ops:       map[string]*computepb.Operation{},
		reqIDs:    map[string]requestRec{},
	}
}

// Instance is a VM as seen through the introspection API and the hooks.
type Instance struct {
	// Project, Zone and Name identify the VM (names are reused, IDs are not).
	Project, Zone, Name string
	// ID is the numeric instance ID (19 digits, unique).
	ID uint64
	// Status is the computepb Instance_Status name: RUNNING, STOPPING,
	// REPAIRING.
	Status string
	// MIG is the owning MIG's name, "" for none.
	MIG string
	// ResizeRequest is the resize request that created the VM, "" for none.
	ResizeRequest string
	// Template is the name of the instance template the VM was created
	// from (its MIG's template at that time), "" for none.
	Template string
	// BootDiskSizeGB is the boot disk's size (0 when unknown).
	BootDiskSizeGB int64
	// MachineType is the bare machine type name.
	MachineType string
	// ProvisioningModel is scheduling.provisioningModel (FLEX_START, ...).
	ProvisioningModel string
	// Labels are the VM's labels, copied from the template.
	Labels map[string]string
	// NetworkIP is the first network interface's internal IPv4 address.
	NetworkIP string
	// PhysicalHost is resourceStatus.physicalHost; it changes after a repair.
	PhysicalHost string
	// Created is the creation time (simulated clock).
	Created time.Time
	// TerminationTime is when the run ends; zero if the VM has no
	// run-duration limit.
	TerminationTime time.Time
}

// ResizeRequest is a MIG resize request as seen through the introspection API.
type ResizeRequest struct {
	// Project, Zone, MIG and Name identify the request.
	Project, Zone, MIG, Name string
	// State is CREATING, ACCEPTED, SUCCEEDED, FAILED or CANCELLED.
	State string
	// ResizeBy is the number of VMs requested.
	ResizeBy int
	// Instances are the requested names, nil for resizeBy requests.
	// Instances and Provisioned are shared with the simulator and with
	// every other answer: read them, do not change them.
	Instances []string
	// Provisioned are the names of the VMs it created.
	Provisioned []string
	// RunDuration is requestedRunDuration; zero if unset (the template's
	// maxRunDuration applies).
	RunDuration time.Duration
	// Created is the creation time (simulated clock).
	Created time.Time
	// CapacityAt is when capacity arrives (zero until ACCEPTED).
	CapacityAt time.Time
	// WorkloadPolicy is the name of the workload policy its MIG references
	// (resourcePolicies.workloadPolicy), "" for none.
	WorkloadPolicy string
	// ErrorCode and ErrorMessage are status.error of a FAILED request.
	ErrorCode, ErrorMessage string
	// Deleted is when resizeRequests.delete removed the request (zero
	// while it exists); only ResizeRequestHistory returns such requests,
	// with the state they were deleted in.
	Deleted time.Time
	// LastAttemptCode and LastAttemptMessage are status.lastAttempt.error
	// of a queued request short of capacity or quota (SetShortage).
	LastAttemptCode, LastAttemptMessage string
}

// MIG is a managed instance group as seen through the introspection API.
type MIG struct {
	// Project, Zone and Name identify the MIG.
	Project, Zone, Name string
	// Template is the instance template name.
	Template string
	// BaseInstanceName prefixes generated VM names.
	BaseInstanceName string
	// TargetSize counts running VMs and queued resize-request VMs.
	TargetSize int
	// ActionOnFailure is instanceLifecyclePolicy.defaultActionOnFailure.
	ActionOnFailure string
	// Instances are the names of its VMs (including VMs being deleted),
	// sorted.
	Instances []string
}

// Call is one recorded mutating request.
type Call struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path.
	Path string
	// Query is the raw query string.
	Query string
	// RequestID is the requestId query parameter, "" if none.
	RequestID string
	// Time is the simulated clock time when it was served.
	Time   time.Time
	Status int // HTTP status of the response
	// OpError is the first error code of the returned operation when it ended
	// DONE with errors (injected failures), "" otherwise.
	OpError string
}

// AuditEntry is one audit LogEntry as handed to Options.AuditSink.
type AuditEntry struct {
	Data  []byte            // LogEntry JSON
	Attrs map[string]string // Pub/Sub attributes
}

// Tick applies every transition due at or before now, in (due time, creation
// order) order, each with its due time as timestamp, then runs hooks and the
// audit sink for what happened.
func (s *Sim) Tick(now time.Time) {
	s.lockQuiet()
	s.advanceQuietLocked(now)
	eff := s.takeEffectsLocked()
	s.mu.Unlock()
	runEffects(eff)
}

// lockForWrite locks mu for a call that may change the simulator's state
// (every call but the read-only introspection ones: NextDue, Instances,
// ResizeRequests, ResizeRequestHistory, MIGs, Calls, AuditEntries,
// Version, and Tick and direct list calls: lockQuiet). It moves Version.
func (s *Sim) lockForWrite() {
	s.mu.Lock()
	s.version++
}

// lockQuiet locks mu for a Tick or a direct list call: a call that changes
// the state only by the transitions it applies (advanceQuietLocked), and
// moves Version only if it applies one.
func (s *Sim) lockQuiet() { s.mu.Lock() }

// Version is a number that changes whenever the simulator's state may have
// changed (an API call, a Tick or direct list call that applied a
// transition, an out-of-band change, an injection): a caller that derives
// something from the state alone (Instances and the other introspection
// calls, a list answer) can keep it while Version stays the same.
func (s *Sim) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// NextDue returns the instant of the next pending transition, if any. A
// driver with a clock.Manual sets the clock there and calls Tick.
func (s *Sim) NextDue() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.nextDueOfStateLocked()
	if !ok {
		return time.Time{}, false
	}
	if d.at.Before(s.watermark) {
		return s.watermark, true
	}
	return d.at, true
}

// now returns the clock time, never earlier than the instant the state has
// already been brought to. Callers hold mu.
func (s *Sim) nowLocked() time.Time {
	now := s.clk.Now()
	if now.Before(s.watermark) {
		return s.watermark
	}
	return now
}

// dueItem is a pending transition: what applyDueLocked does at its time.
// (A value rather than a closure: the next one is looked for among every
// VM and resize request on each call.)
type dueItem struct {
	at   time.Time
	seq  uint64
	kind dueKind
	in   *instanceRec
	m    *migRec
	rr   *rrRec
}

type dueKind int

const (
	dueFinishDelete dueKind = iota + 1
	dueExpire
	dueFinishRepair
	dueAccept
	dueAttempt
)

func (s *Sim) applyDueLocked(d dueItem, at time.Time) {
	switch d.kind {
	case dueFinishDelete:
		s.finishDeleteLocked(d.in, at)
	case dueExpire:
		s.expireLocked(d.in, at)
	case dueFinishRepair:
		s.finishRepairLocked(d.in, at)
	case dueAccept:
		s.acceptLocked(d.m, d.rr, at)
	case dueAttempt:
		s.attemptLocked(d.m, d.rr, at)
	default:
		panic(fmt.Sprintf("computesim: transition of kind %d", d.kind))
	}
}

func (s *Sim) nextDueLocked() (dueItem, bool) {
	var best dueItem
	found := false
	consider := func(d dueItem) {
		if !found || d.at.Before(best.at) || (d.at.Equal(best.at) && d.seq < best.seq) {
			best, found = d, true
		}
	}
	for _, in := range s.instances {
		if d, ok := s.instanceDueLocked(in); ok {
			consider(d)
		}
	}
	for _, m := range s.migs {
		for _, rr := range m.rrs {
			if d, ok := s.rrDueLocked(m, rr); ok {
				consider(d)
			}
		}
	}
	return best, found
}

// nextDueOfStateLocked is nextDueLocked for a caller holding mu without
// having changed anything (NextDue): the state is the one of Version, and
// its next transition is remembered until Version changes.
func (s *Sim) nextDueOfStateLocked() (dueItem, bool) {
	if !s.nextKnown || s.nextAt != s.version {
		s.next, s.nextOK = s.nextDueLocked()
		s.nextKnown, s.nextAt = true, s.version
	}
	return s.next, s.nextOK
}

// advanceQuietLocked is advanceLocked for a call that changes nothing
// else, right after it took the lock (lockQuiet): a Tick or a direct list
// call. It moves Version if it applies a transition. When the state (that of Version) has its next transition
// remembered and it is not due, nothing is looked for; the next
// transition after advancing is remembered for the state the call leaves.
func (s *Sim) advanceQuietLocked(now time.Time) {
	if s.nextKnown && s.nextAt == s.version && (!s.nextOK || s.next.at.After(now)) {
		// As advanceLocked when nothing is due.
		if now.After(s.watermark) {
			s.watermark = now
		}
		return
	}
	applied, next, ok, complete := s.advanceToLocked(now)
	if applied {
		s.version++
	}
	s.next, s.nextOK, s.nextKnown, s.nextAt = next, ok, complete, s.version
}

// maxStepsPerTick guards against a transition that fails to change state.
const maxStepsPerTick = 1_000_000

// advanceLocked applies every transition due at or before now.
func (s *Sim) advanceLocked(now time.Time) { s.advanceToLocked(now) }

// advanceToLocked is advanceLocked, also reporting whether it applied any
// transition (if not, the state is the same as before but for the
// watermark, which no answer shows) and returning the next transition
// after it (ok false: none) when it stopped at one not due (complete).
func (s *Sim) advanceToLocked(now time.Time) (applied bool, next dueItem, ok, complete bool) {
	for n := 0; ; n++ {
		if n == maxStepsPerTick {
			s.opts.Logger.Error("computesim: too many transitions in one tick; stopping", "now", now)
			break
		}
		d, found := s.nextDueLocked()
		if !found || d.at.After(now) {
			next, ok, complete = d, found, true
			break
		}
		at := d.at
		if at.Before(s.watermark) {
			at = s.watermark
		}
		s.watermark = at
		s.applyDueLocked(d, at)
		applied = true
	}
	if now.After(s.watermark) {
		s.watermark = now
	}
	return applied, next, ok, complete
}

func (s *Sim) instanceDueLocked(in *instanceRec) (dueItem, bool) {
	switch {
	case !in.deleteAt.IsZero():
		return dueItem{at: in.deleteAt, seq: in.seq, kind: dueFinishDelete, in: in}, true
	case !in.repairAt.IsZero():
		if !in.termination.IsZero() && !in.termination.After(in.repairAt) {
			return dueItem{at: in.termination, seq: in.seq, kind: dueExpire, in: in}, true
		}
		return dueItem{at: in.repairAt, seq: in.seq, kind: dueFinishRepair, in: in}, true
	case !in.termination.IsZero():
		return dueItem{at: in.termination, seq: in.seq, kind: dueExpire, in: in}, true
	}
	return dueItem{}, false
}

func (s *Sim) rrDueLocked(m *migRec, rr *rrRec) (dueItem, bool) {
	switch rr.pb.GetState() {
	case stateCreating:
		return dueItem{at: rr.acceptAt, seq: rr.seq, kind: dueAccept, m: m, rr: rr}, true
	case stateAccepted:
		for _, n := range rr.names {
			if _, taken := s.instances[instanceKey(rr.project, rr.zone, n)]; taken {
				return dueItem{}, false // waits until the name is free
			}
		}
		return dueItem{at: rr.capacityAt, seq: rr.seq, kind: dueAttempt, m: m, rr: rr}, true
	}
	return dueItem{}, false
}

// effects run outside the lock, in order.
func (s *Sim) emitLocked(f func()) { s.effects = append(s.effects, f) }

func (s *Sim) takeEffectsLocked() []func() {
	eff := s.effects
	s.effects = nil
	return eff
}

func runEffects(eff []func()) {
	for _, f := range eff {
		f()
	}
}

func (s *Sim) hookLocked(h func(Instance), in *instanceRec) {
	if h == nil {
		return
	}
	snap := s.snapshotLocked(in)
	s.emitLocked(func() { h(snap) })
}

// --- deterministic identifiers ---

func (s *Sim) nextSeqLocked() uint64 {
	s.seq++
	return s.seq
}

// newIDLocked returns a unique 19-digit numeric ID, like Compute's.
func (s *Sim) newIDLocked() uint64 {
	for {
		id := 1_000_000_000_000_000_000 + s.rng.Uint64N(8_000_000_000_000_000_000)
		if !s.usedIDs[id] {
			s.usedIDs[id] = true
			return id
		}
	}
}

const lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"

func (s *Sim) randStringLocked(alphabet string, n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[s.rng.IntN(len(alphabet))])
	}
	return b.String()
}

func (s *Sim) hexLocked(n int) string { return s.randStringLocked("0123456789abcdef", n) }

// uniqueLocked draws from gen until it returns a value not handed out before.
func (s *Sim) uniqueLocked(gen func() string) string {
	for {
		v := gen()
		if !s.usedNames[v] {
			s.usedNames[v] = true
			return v
		}
	}
}

// --- keys and links ---

const linkBase = "https://www.googleapis.com/compute/v1/"

func link(rel string) string { return linkBase + rel }

func templateKey(project, name string) string {
	return "projects/" + project + "/global/instanceTemplates/" + name
}

// migKey is a MIG's path; zone is a region for a regional MIG.
func migKey(project, zone, name string) string {
	return "projects/" + project + "/" + scopeOf(zone) + "/instanceGroupManagers/" + name
}

func instanceKey(project, zone, name string) string {
	return "projects/" + project + "/zones/" + zone + "/instances/" + name
}

func zoneLink(project, zone string) string { return link("projects/" + project + "/zones/" + zone) }

// lastSegment returns what follows the last "/" of a URL or path.
func lastSegment(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }

// formatTime renders a timestamp the way Compute does (RFC 3339 with
// milliseconds and a numeric offset). Compute uses the US Pacific offset; the
// simulator uses UTC, which any RFC 3339 parser handles the same way.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000-07:00") }

func (s *Sim) callerPrincipal(project string) string {
	if s.opts.CallerPrincipal != "" {
		return s.opts.CallerPrincipal
	}
	return "flexslurm@" + project + ".iam.gserviceaccount.com"
}

func (s *Sim) cloudServicesPrincipal() string {
	return s.opts.ProjectNumber + "@cloudservices.gserviceaccount.com"
}

// --- introspection ---

func (s *Sim) snapshotLocked(in *instanceRec) Instance {
	out := Instance{
		Project:           in.project,
		Zone:              in.zone,
		Name:              in.name,
		ID:                in.pb.GetId(),
		Status:            in.pb.GetStatus(),
		MIG:               in.mig,
		ResizeRequest:     in.rr,
		Template:          in.template,
		MachineType:       lastSegment(in.pb.GetMachineType()),
		ProvisioningModel: in.pb.GetScheduling().GetProvisioningModel(),
		Labels:            maps.Clone(in.pb.GetLabels()),
		PhysicalHost:      in.pb.GetResourceStatus().GetPhysicalHost(),
		Created:           in.created,
		TerminationTime:   in.termination,
	}
	if nics := in.pb.GetNetworkInterfaces(); len(nics) > 0 {
		out.NetworkIP = nics[0].GetNetworkIP()
	}
	for _, d := range in.pb.GetDisks() {
		if d.GetBoot() {
			out.BootDiskSizeGB = d.GetDiskSizeGb()
		}
	}
	return out
}

// Instances returns every VM that exists (including VMs being deleted),
// ordered by creation.
func (s *Sim) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := slices.Collect(maps.Values(s.instances))
	slices.SortFunc(recs, func(a, b *instanceRec) int { return cmpSeq(a.seq, b.seq) })
	out := make([]Instance, 0, len(recs))
	for _, in := range recs {
		out = append(out, s.snapshotLocked(in))
	}
	return out
}

// ResizeRequests returns every resize request of every MIG, ordered by
// creation.
func (s *Sim) ResizeRequests() []ResizeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resizeRequestsLocked(false)
}

// ResizeRequestHistory returns every resize request of every MIG and every
// one deleted with resizeRequests.delete (Deleted set, in the state it was
// deleted in), ordered by creation: what was ever asked for.
func (s *Sim) ResizeRequestHistory() []ResizeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resizeRequestsLocked(true)
}

func (s *Sim) resizeRequestsLocked(history bool) []ResizeRequest {
	var recs []*rrRec
	for _, m := range s.migs {
		for _, rr := range m.rrs {
			recs = append(recs, rr)
		}
	}
	if history {
		recs = append(recs, s.deletedRRs...)
	}
	slices.SortFunc(recs, func(a, b *rrRec) int { return cmpSeq(a.seq, b.seq) })
	out := make([]ResizeRequest, 0, len(recs))
	for _, rr := range recs {
		r := ResizeRequest{
			Project:  rr.project,
			Zone:     rr.zone,
			MIG:      rr.mig,
			Name:     rr.pb.GetName(),
			State:    rr.pb.GetState(),
			ResizeBy: rr.count,
			// Shared: the simulator never changes these slices in
			// place (TestResizeRequestsShareUnchangingSlices).
			Instances:      rr.names,
			Provisioned:    rr.provisionedInstance,
			RunDuration:    rr.runDuration,
			Created:        rr.created,
			CapacityAt:     rr.capacityAt,
			Deleted:        rr.deleted,
			WorkloadPolicy: rr.policy,
		}
		if errs := rr.pb.GetStatus().GetError().GetErrors(); len(errs) > 0 {
			r.ErrorCode, r.ErrorMessage = errs[0].GetCode(), errs[0].GetMessage()
		}
		if errs := rr.pb.GetStatus().GetLastAttempt().GetError().GetErrors(); len(errs) > 0 {
			r.LastAttemptCode, r.LastAttemptMessage = errs[0].GetCode(), errs[0].GetMessage()
		}
		out = append(out, r)
	}
	return out
}

// MIGs returns every MIG, ordered by creation.
func (s *Sim) MIGs() []MIG {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := slices.Collect(maps.Values(s.migs))
	slices.SortFunc(recs, func(a, b *migRec) int { return cmpSeq(a.seq, b.seq) })
	out := make([]MIG, 0, len(recs))
	for _, m := range recs {
		g := MIG{
			Project:          m.project,
			Zone:             m.zone,
			Name:             m.name,
			Template:         lastSegment(m.templateKey),
			BaseInstanceName: m.pb.GetBaseInstanceName(),
			TargetSize:       int(m.pb.GetTargetSize()),
			ActionOnFailure:  m.pb.GetInstanceLifecyclePolicy().GetDefaultActionOnFailure(),
		}
		for _, in := range s.migMembersLocked(m) {
			g.Instances = append(g.Instances, in.name)
		}
		out = append(out, g)
	}
	return out
}

// Calls returns every mutating request served so far (POST, DELETE and PATCH
// except listManagedInstances and operations wait), in order.
func (s *Sim) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// AuditEntries returns every audit entry written so far, in order, whether or
// not a sink accepted it.
func (s *Sim) AuditEntries() []AuditEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.audit)
}

// ExpireNow ends the run of VM name in zone now, as if its termination time
// had come: it is deleted (after Options.DeleteDelay) and the expiry audit
// entries are written. It returns an error if no such VM exists or it is
// already being deleted.
func (s *Sim) ExpireNow(zone, name string) error {
	s.lockForWrite()
	now := s.nowLocked()
	s.advanceLocked(now)
	in := s.findInstanceLocked(zone, name)
	var err error
	switch {
	case in == nil:
		err = fmt.Errorf("computesim: no instance %s in zone %s", name, zone)
	case !in.deleteAt.IsZero():
		err = fmt.Errorf("computesim: instance %s in zone %s is already being deleted", name, zone)
	default:
		in.termination = now
		s.setTerminationLocked(in)
		s.advanceLocked(now)
	}
	eff := s.takeEffectsLocked()
	s.mu.Unlock()
	runEffects(eff)
	return err
}

// FailResizeRequest ends an active (CREATING or ACCEPTED) resize request as
// FAILED with status.error{code, message}, shrinking the MIG's target size, as
// Compute does when provisioning fails for good.
func (s *Sim) FailResizeRequest(zone, mig, name, code, message string) error {
	s.lockForWrite()
	defer s.mu.Unlock()
	s.advanceLocked(s.nowLocked())
	for _, m := range s.migs {
		if m.zone != zone || m.name != mig {
			continue
		}
		rr := m.rrs[name]
		if rr == nil {
			break
		}
		if st := rr.pb.GetState(); st != stateCreating && st != stateAccepted {
			return fmt.Errorf("computesim: resize request %s is %s, not active", name, st)
		}
		rr.pb.State = strp(stateFailed)
		// status.error is set on the transition to FAILED, and
		// lastAttempt is cleared (it describes queued requests only).
		rr.pb.Status = &computepb.InstanceGroupManagerResizeRequestStatus{Error: &computepb.Error{
			Errors: []*computepb.Errors{{Code: strp(code), Message: strp(message)}},
		}}
		m.pb.TargetSize = i32p(m.pb.GetTargetSize() - int32(rr.count))
		return nil
	}
	return fmt.Errorf("computesim: no resize request %s in MIG %s in zone %s", name, mig, zone)
}

func (s *Sim) findInstanceLocked(zone, name string) *instanceRec {
	var found *instanceRec
	for _, in := range s.instances {
		if in.zone == zone && in.name == name && (found == nil || in.seq < found.seq) {
			found = in
		}
	}
	return found
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func strp(s string) *string { return &s }
func i32p(v int32) *int32   { return &v }
func u64p(v uint64) *uint64 { return &v }
func boolp(v bool) *bool    { return &v }
func i64p(v int64) *int64   { return &v }
func durationOf(d *computepb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(d.GetSeconds())*time.Second + time.Duration(d.GetNanos())
}
