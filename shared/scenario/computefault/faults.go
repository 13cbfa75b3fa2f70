package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexslurm/flexslurm/shared/computesim"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/scenario/lang"
)

// computeFault is one compute_error step in force.
type computeFault struct {
	name      string
	method    string
	path      *regexp.Regexp
	body      *regexp.Regexp
	status    int
	reason    string
	code      string
	message   string
	remaining int       // calls left; < 0: unlimited (window only)
	until     time.Time // zero: no window
	fired     int
	lastFired time.Time
}

func (f *computeFault) active(now time.Time) bool {
	if f.remaining == 0 {
		return false
	}
	return f.until.IsZero() || now.Before(f.until)
}

func (f *computeFault) matches(method, path, body string) bool {
	if f.method != "" && !strings.EqualFold(f.method, method) {
		return false
	}
	if f.path != nil && !f.path.MatchString(path) {
		return false
	}
	if f.body != nil && !f.body.MatchString(body) {
		return false
	}
	return true
}

// CallRecord is one HTTP call flexslurm made to Compute Engine.
type CallRecord struct {
	Time   time.Time
	Method string
	Path   string
	Body   string
	// Status is the HTTP status of the response.
	Status int
	// Injected names the compute_error fault applied to the call, "" if none.
	Injected string
	// OpError is the operation error code the fault made the call end with.
	OpError string
	// Replayed: Compute answered from its requestId cache (a retry of an
	// earlier call within 60 minutes); faults never apply to such calls.
	Replayed bool
}

// Failed reports whether the call failed (HTTP error or failed operation).
func (c CallRecord) Failed() bool { return c.Status >= 400 || c.OpError != "" }

// computeFaults sits between flexslurm's Compute client and the simulator:
// it records every call and applies compute_error faults by arming a
// one-shot simulator injection for exactly the call that matched.
type computeFaults struct {
	mu     sync.Mutex
	now    func() time.Time
	sim    *computesim.Sim
	faults []*computeFault
	omits  []*listOmit // list_omit steps
	// shortages are the ends of the shortage steps' windows (a zero time
	// for a shortage until the end): capacity is unavailable until then.
	shortages []time.Time
	calls     []CallRecord
	rids      map[string]time.Time // zone|requestId → when Compute remembered it
	next      atomic.Pointer[http.Handler]
}

// requestIDWindow is how long Compute remembers a requestId (computesim).
const requestIDWindow = 60 * time.Minute

func (c *computeFaults) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	now := c.now()
	path := req.URL.Path
	rec := CallRecord{Time: now, Method: req.Method, Path: path, Body: string(body)}
	mut := mutating(req.Method, path)
	ridKey := ""
	if rid := req.URL.Query().Get("requestId"); mut && rid != "" {
		ridKey = zoneOf(path) + "|" + rid
	}

	c.mu.Lock()
	if ridKey != "" {
		if at, ok := c.rids[ridKey]; ok && now.Sub(at) < requestIDWindow {
			rec.Replayed = true
		}
	}
	var armed *computeFault
	if !rec.Replayed && !strings.Contains(path, "/operations/") {
		for _, f := range c.faults {
			if !f.active(now) || !f.matches(req.Method, path, rec.Body) {
				continue
			}
			// The apiv1 client retries GETs answered 503 or 504 with real
			// sleeps; on a manual clock a window would never end.
			if req.Method == http.MethodGet && (f.status == 503 || f.status == 504) {
				continue
			}
			armed = f
			break
		}
	}
	if armed != nil {
		armed.fired++
		armed.lastFired = now
		if armed.remaining > 0 {
			armed.remaining--
		}
		rec.Injected = armed.name
		if armed.code != "" && mut {
			rec.OpError = armed.code
		}
		c.sim.Inject(computesim.Injection{
			Match:  computesim.Match{Method: req.Method, Path: "^" + regexp.QuoteMeta(path) + "$"},
			Status: armed.status, Reason: armed.reason, Code: armed.code, Message: armed.message, Times: 1,
		})
	}
	c.mu.Unlock()

	var omits []*listOmit
	if listingOfVMs(req.Method, path) {
		c.mu.Lock()
		for _, o := range c.omits {
			if o.active(now) {
				omits = append(omits, o)
			}
		}
		c.mu.Unlock()
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	if len(omits) == 0 {
		(*c.next.Load()).ServeHTTP(sw, req)
	} else {
		// A listing that succeeds but leaves something out.
		bw := &bufferedWriter{header: w.Header(), status: http.StatusOK}
		(*c.next.Load()).ServeHTTP(bw, req)
		out := bw.body.Bytes()
		if bw.status == http.StatusOK {
			var names []string
			for _, o := range omits {
				var did bool
				if out, did = o.omit(out); did {
					c.mu.Lock()
					o.fired++
					if o.remaining > 0 {
						o.remaining--
					}
					c.mu.Unlock()
					names = append(names, o.name)
				}
			}
			rec.Injected = strings.Join(names, ",")
		}
		w.Header().Del("Content-Length")
		sw.WriteHeader(bw.status)
		sw.Write(out)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if armed != nil {
		c.sim.ClearInjections()
	}
	rec.Status = sw.status
	if ridKey != "" && !rec.Replayed && sw.status == http.StatusOK {
		c.rids[ridKey] = now
	}
	c.calls = append(c.calls, rec)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// mutating reports whether a Compute call changes state (and returns an
// operation), as computesim counts them.
func mutating(method, path string) bool {
	if method == http.MethodGet || strings.Contains(path, "/operations/") {
		return false
	}
	return !strings.HasSuffix(path, "/listManagedInstances")
}

func zoneOf(path string) string {
	if _, rest, ok := strings.Cut(path, "/zones/"); ok {
		z, _, _ := strings.Cut(rest, "/")
		return z
	}
	return "global"
}

func (c *computeFaults) add(f *computeFault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, f)
}

func (c *computeFaults) snapshot() ([]CallRecord, []computeFault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := append([]CallRecord(nil), c.calls...)
	faults := make([]computeFault, len(c.faults))
	for i, f := range c.faults {
		faults[i] = *f
	}
	return calls, faults
}

// Sample paths for blockedUntil.
const (
	pathResizeRequests = "/compute/v1/projects/p/zones/z/instanceGroupManagers/m/resizeRequests"
	anyPath            = ""
)

// since returns the calls recorded after the first n.
func (c *computeFaults) since(n int) []CallRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n >= len(c.calls) {
		return nil
	}
	return append([]CallRecord(nil), c.calls[n:]...)
}

// blockedUntil is the latest instant a fault on POST calls to path (any
// path for "") was, or will be for a window, in force: the end of its
// window, or the last call it failed; or a shortage ends.
func (c *computeFaults) blockedUntil(path string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out time.Time
	for _, f := range c.faults {
		if f.method != "" && !strings.EqualFold(f.method, http.MethodPost) {
			continue
		}
		if path != "" && f.path != nil && !f.path.MatchString(path) {
			continue
		}
		end := f.lastFired
		if !f.until.IsZero() && f.remaining != 0 {
			end = f.until
		}
		if end.After(out) {
			out = end
		}
	}
	// A shortage blocks provisioning, whatever the calls: requests queue
	// until it ends.
	for _, end := range c.shortages {
		if end.IsZero() {
			end = farFuture
		}
		if end.After(out) {
			out = end
		}
	}
	return out
}

// farFuture stands for the end of a shortage that lasts until the end.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// addShortage records a shortage's end (zero: until the end).
func (c *computeFaults) addShortage(until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shortages = append(c.shortages, until)
}

// errInjectedCrash marks a crash the runner injected.
var errInjectedCrash = errors.New("injected crash")

// crashPlan is the crash planned for the delivery attempt in progress.
type crashPlan struct {
	point   lang.CrashPoint
	source  string // what planned it, for the trace
	actions int
	armed   bool // an "after" point was reached: crash at the next boundary
	fired   bool
	at      string // where it fired
}

// boundary is called by apply.Deps.Fault.
func (c *crashPlan) boundary(point string, a plan.Action) error {
	if c.fired {
		return nil
	}
	if c.armed {
		c.fired = true
		c.at = "after " + c.at + ", at " + boundaryName(point, a)
		return fmt.Errorf("%w %s (%s)", errInjectedCrash, c.point, c.source)
	}
	switch point {
	case "commit":
		if c.point.Commit {
			c.fired = true
			c.at = "commit"
			return fmt.Errorf("%w at commit (%s)", errInjectedCrash, c.source)
		}
	case "action":
		c.actions++
		hit := c.point.Hits(c.actions, a)
		if !hit {
			return nil
		}
		if c.point.After {
			c.armed = true
			c.at = fmt.Sprintf("action %d (%s)", c.actions, a)
			return nil
		}
		c.fired = true
		c.at = fmt.Sprintf("before action %d (%s)", c.actions, a)
		return fmt.Errorf("%w before %s (%s)", errInjectedCrash, a, c.source)
	}
	return nil
}

func boundaryName(point string, a plan.Action) string {
	if a == nil {
		return point
	}
	return fmt.Sprintf("%s %s", point, a)
}

// hashUnit maps a seed and parts to a number in [0, 1), stably.
func hashUnit(seed uint64, parts ...string) float64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	// 53 bits of the hash make a float64 in [0, 1).
	return float64(h.Sum64()>>11) / float64(uint64(1)<<53)
}

// randomCrashPoints are the boundaries random faults pick from.
var randomCrashPoints = []string{"commit", "before#1", "after#1", "before#2", "after#2", "before#3", "after#3"}
