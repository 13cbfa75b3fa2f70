// Package computefault is the layer between flexslurm's Compute client and
// the Compute Engine simulator in a scenario: it records every call, fails
// the calls compute_error steps match (by method, path and body pattern,
// for a number of calls or a time window) through the simulator's one-shot
// injections, so that the error has the simulator's exact shape, and
// rewrites VM listings list_omit steps leave something out of. Calls Compute
// answers from its requestId cache (a retry within 60 minutes) are never
// failed. BlockedUntil tells the invariants how long faults and shortages
// held provisioning back.
package computefault

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/scenario/lang"
)

// fault is one compute_error step in force.
type fault struct {
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

func (f *fault) active(now time.Time) bool {
	if f.remaining == 0 {
		return false
	}
	return f.until.IsZero() || now.Before(f.until)
}

func (f *fault) matches(method, path, body string) bool {
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

// Layer sits between flexslurm's Compute client and the simulator:
// it records every call and applies compute_error faults by arming a
// one-shot simulator injection for exactly the call that matched, and
// list_omit steps by rewriting the listings of VMs the simulator answers.
type Layer struct {
	mu     sync.Mutex
	now    func() time.Time
	sim    *computesim.Sim
	faults []*fault
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

func (c *Layer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
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
	var armed *fault
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

// ShortcutAllows reports whether a list call (method GET, path) may be
// answered without HTTP (computesim.ListShortcut): only when ServeHTTP
// would neither arm a compute_error fault for it nor apply a list_omit
// step to its response. A call it refuses goes over HTTP through
// ServeHTTP, which injects the fault as before.
func (c *Layer) ShortcutAllows(method, path string) bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.Contains(path, "/operations/") {
		for _, f := range c.faults {
			if !f.active(now) || !f.matches(method, path, "") {
				continue
			}
			if method == http.MethodGet && (f.status == 503 || f.status == 504) {
				continue // never armed for a GET (ServeHTTP)
			}
			return false
		}
	}
	if listingOfVMs(method, path) {
		for _, o := range c.omits {
			if o.active(now) {
				return false
			}
		}
	}
	return true
}

// ShortcutAnswered records a list call answered without HTTP, as
// ServeHTTP records a successful one.
func (c *Layer) ShortcutAnswered(method, path string) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, CallRecord{Time: now, Method: method, Path: path, Status: http.StatusOK})
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

func (c *Layer) add(f *fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, f)
}

func (c *Layer) snapshot() ([]CallRecord, []fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := append([]CallRecord(nil), c.calls...)
	faults := make([]fault, len(c.faults))
	for i, f := range c.faults {
		faults[i] = *f
	}
	return calls, faults
}

// Sample paths for BlockedUntil.
const (
	PathResizeRequests = "/compute/v1/projects/p/zones/z/instanceGroupManagers/m/resizeRequests"
	AnyPath            = ""
)

// Since returns the calls recorded after the first n.
func (c *Layer) Since(n int) []CallRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n >= len(c.calls) {
		return nil
	}
	return append([]CallRecord(nil), c.calls[n:]...)
}

// Len is the number of calls recorded so far.
func (c *Layer) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// BlockedUntil is the latest instant a fault on POST calls to path (any
// path for "") was, or will be for a window, in force: the end of its
// window, or the last call it failed; or a shortage ends.
func (c *Layer) BlockedUntil(path string) time.Time {
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

// AddShortage records a shortage's end (zero: until the end).
func (c *Layer) AddShortage(until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shortages = append(c.shortages, until)
}

// New is a fault layer with no fault; Attach gives it the simulator.
func New() *Layer { return &Layer{rids: map[string]time.Time{}} }

// Attach makes sim the Compute the layer serves, on the clock now.
func (c *Layer) Attach(now func() time.Time, sim *computesim.Sim) {
	c.mu.Lock()
	c.now, c.sim = now, sim
	c.mu.Unlock()
	next := http.Handler(sim)
	c.next.Store(&next)
}

// Calls returns the calls recorded so far.
func (c *Layer) Calls() []CallRecord {
	calls, _ := c.snapshot()
	return calls
}

// InjectedErrors counts the calls compute_error faults failed.
func (c *Layer) InjectedErrors() int {
	_, faults := c.snapshot()
	n := 0
	for _, f := range faults {
		n += f.fired
	}
	return n
}

// AddError puts a compute_error step (step i of the scenario, at now) in
// force: the next matching calls fail (Times, default 1), or every matching
// call until the end of its window (For or Until, from start).
func (c *Layer) AddError(i int, ce lang.ComputeErrorStep, start, now time.Time) {
	f := &fault{name: ce.Name, method: strings.ToUpper(ce.Method), status: ce.Status, reason: ce.Reason, code: ce.Code, message: ce.Message}
	if f.name == "" {
		f.name = fmt.Sprintf("compute-error-%d", i)
	}
	if ce.Path != "" {
		f.path = regexp.MustCompile(ce.Path)
	}
	if ce.Body != "" {
		f.body = regexp.MustCompile(ce.Body)
	}
	if f.status == 0 {
		switch {
		case strings.Contains(ce.Code, "QUOTA"):
			f.status = 403
		case ce.Code != "":
			f.status = 503
		default:
			f.status = 500
		}
	}
	if f.reason == "" && ce.Code == "" {
		f.reason = "backendError"
	}
	if f.message == "" {
		f.message = "scenario fault " + f.name
	}
	switch {
	case ce.Until != nil:
		f.until = start.Add(ce.Until.Offset)
	case ce.For > 0:
		f.until = now.Add(ce.For.D())
	}
	f.remaining = ce.Times
	if f.remaining == 0 {
		if f.until.IsZero() {
			f.remaining = 1
		} else {
			f.remaining = -1
		}
	}
	c.add(f)
}
