// Package harness runs the four functions in one process against the
// in-memory store, the Compute simulator (over real HTTP, through the real
// apiv1 clients) and a recording publisher, on a manual clock. Events are
// delivered as the CloudEvents Eventarc would hand them to a deployed
// function, so handler tests, scenario files and chaos runs exercise the
// production code paths end to end, without emulators.
package harness

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sort"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/functions/expiry"
	"github.com/flexslurm/flexslurm/functions/reconcile"
	"github.com/flexslurm/flexslurm/functions/repair"
	"github.com/flexslurm/flexslurm/functions/scaleup"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Project is the harness's Google Cloud project.
const Project = "flexslurm-test"

// Message is one published message.
type Message struct {
	Topic string
	ID    string
	Data  []byte
	Attrs map[string]string
}

// Publisher records published messages. It is safe for concurrent use.
type Publisher struct {
	mu   sync.Mutex
	seq  int
	msgs []Message
	// Fail, when set, is returned by Publish instead of publishing.
	Fail error
}

// Publish records a message.
func (p *Publisher) Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Fail != nil {
		return "", p.Fail
	}
	p.seq++
	id := fmt.Sprintf("m%d", p.seq)
	p.msgs = append(p.msgs, Message{Topic: topic, ID: id, Data: append([]byte(nil), data...), Attrs: attrs})
	return id, nil
}

// Take returns and forgets the messages published to topic.
func (p *Publisher) Take(topic string) []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out, keep []Message
	for _, m := range p.msgs {
		if m.Topic == topic {
			out = append(out, m)
		} else {
			keep = append(keep, m)
		}
	}
	p.msgs = keep
	return out
}

// Options configures a harness.
type Options struct {
	Start   time.Time                         // manual clock start; default 2026-11-30T00:00:00Z
	Sim     computesim.Options                // simulator options (AuditSink is set by the harness)
	Policy  plan.Policy                       // decision timing knobs
	Log     io.Writer                         // logs; default discarded
	Compute func(apply.Compute) apply.Compute // optional wrapper (fault injection)
	// Fault is apply.Deps.Fault: crash injection at side-effect boundaries.
	Fault func(point string, a plan.Action) error
	// VerifyTokens verifies the reports' identity tokens as a deployed
	// function does (identity.Google, trusting the simulator's keys at
	// CertsURL); false proves senders with KnownSender (the VM a report
	// names sent it, unless SenderAttr says otherwise).
	VerifyTokens bool
	// Store replaces the in-memory store (e.g. the Firestore adapter on the
	// emulator, for benchmarks).
	Store store.Store
}

// Harness is the in-process system.
type Harness struct {
	Clock *clock.Manual
	// Store is the state store: Options.Store, or an in-memory one.
	Store     store.Store
	Sim       *computesim.Sim
	Publisher *Publisher
	Runner    *apply.Runner
	ScaleUp   apply.EventHandler
	Expiry    apply.EventHandler
	Repair    apply.EventHandler
	Reconcile apply.EventHandler

	srv    *httptest.Server
	gce    *gce.Client
	mu     sync.Mutex
	audit  []Message // audit entries the sink delivered, not yet handed to Expiry
	nextID int
}

// New starts a harness. Close it when done.
func New(ctx context.Context, o Options) (*Harness, error) {
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	h := &Harness{Clock: clock.NewManual(o.Start), Publisher: &Publisher{}}
	h.Store = o.Store
	if h.Store == nil {
		h.Store = store.NewMemory(h.Clock.Now)
	}
	// Logs that go nowhere are not formatted either: a scenario logs as
	// it handles every event (docs/chaos.md).
	log, simLog := logx.New(o.Log, slog.LevelDebug), slog.New(slog.NewTextHandler(o.Log, nil))
	if o.Log == io.Discard {
		log, simLog = slog.New(slog.DiscardHandler), slog.New(slog.DiscardHandler)
	}
	simOpts := o.Sim
	simOpts.Project = Project
	simOpts.Logger = simLog
	simOpts.AuditSink = func(ctx context.Context, entry []byte, attrs map[string]string) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.audit = append(h.audit, Message{Topic: config.TopicExpiry, Data: append([]byte(nil), entry...), Attrs: attrs})
		return nil
	}
	h.Sim = computesim.New(simOpts, h.Clock)
	h.srv = httptest.NewServer(h.Sim)
	c, err := gce.New(ctx, Project, option.WithEndpoint(h.srv.URL), option.WithoutAuthentication())
	if err != nil {
		h.srv.Close()
		return nil, err
	}
	h.gce = c
	var comp apply.Compute = c
	if o.Compute != nil {
		comp = o.Compute(c)
	}
	var v identity.Verifier = KnownSender{Store: h.Store}
	if o.VerifyTokens {
		g, err := identity.NewGoogle(ctx, h.CertsURL())
		if err != nil {
			h.srv.Close()
			return nil, err
		}
		v = g
	}
	h.Runner = apply.New(apply.Deps{
		Store: h.Store, Compute: comp, Publisher: h.Publisher, Clock: h.Clock,
		Log: log, Policy: o.Policy,
		SlurmTopic: config.TopicSlurmCommands, Project: Project, Fault: o.Fault,
		Identity: v, ControllerVM: ControllerVM,
	})
	h.ScaleUp = apply.NewHandler(h.Runner, scaleup.Function)
	h.Expiry = apply.NewHandler(h.Runner, expiry.Function)
	h.Repair = apply.NewHandler(h.Runner, repair.Function)
	h.Reconcile = apply.NewHandler(h.Runner, reconcile.Function)
	return h, nil
}

// CertsURL is where the simulator serves the keys of its VMs' identity
// tokens (identity.NewGoogle's certsURL).
func (h *Harness) CertsURL() string { return h.srv.URL + computesim.CertsPath }

// DeliverWith is Deliver with message attributes (an identity token, or
// SenderAttr).
func (h *Harness) DeliverWith(ctx context.Context, topic, id string, data []byte, attrs map[string]string) error {
	e := CloudEvent(topic, id, data, attrs)
	switch topic {
	case config.TopicJobs, config.TopicClusterSpec:
		return h.ScaleUp.Handle(ctx, e)
	case config.TopicHealthFailure:
		return h.Repair.Handle(ctx, e)
	}
	return fmt.Errorf("no report-reading function reads topic %s", topic)
}

// Close stops the simulator's server and the clients.
func (h *Harness) Close() {
	h.gce.Close()
	h.srv.Close()
}

// pubsubEnvelope is the data of a messagePublished CloudEvent as the
// harness builds it.
type pubsubEnvelope struct {
	Message struct {
		Attributes map[string]string `json:"attributes"`
		Data       string            `json:"data"`
		MessageID  string            `json:"messageId"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}

// CloudEvent wraps a payload as the messagePublished CloudEvent a function
// receives for a message of topic with id.
func CloudEvent(topic, id string, data []byte, attrs map[string]string) cloudevents.Event {
	e := cloudevents.New()
	e.SetID(id)
	e.SetType(event.PubSubType)
	setSource(&e, "//pubsub.googleapis.com/projects/"+Project+"/topics/"+topic)
	// A struct with the fields in the order encoding/json gives a map's
	// keys (sorted): the bytes are those of the map this envelope used to
	// be (TestCloudEventEnvelope), encoded without sorting map keys.
	sub := "projects/" + Project + "/subscriptions/" + topic
	if attrs == nil && plainJSON(id) && plainJSON(sub) {
		// What encoding/json gives for the struct below, written
		// directly: neither string needs escaping, base64 never does,
		// and nil attributes are null.
		const head, mid, tail = `{"message":{"attributes":null,"data":"`, `","messageId":"`, `"},"subscription":"`
		n := base64.StdEncoding.EncodedLen(len(data))
		b := make([]byte, 0, len(head)+n+len(mid)+len(id)+len(tail)+len(sub)+2)
		b = append(b, head...)
		b = base64.StdEncoding.AppendEncode(b, data)
		b = append(b, mid...)
		b = append(b, id...)
		b = append(b, tail...)
		b = append(b, sub...)
		b = append(b, `"}`...)
		e.SetDataContentType(cloudevents.ApplicationJSON)
		e.DataEncoded, e.DataBase64 = b, false
		return e
	}
	env := pubsubEnvelope{Subscription: sub}
	env.Message.Attributes, env.Message.Data, env.Message.MessageID = attrs, base64.StdEncoding.EncodeToString(data), id
	_ = e.SetData(cloudevents.ApplicationJSON, env)
	return e
}

// sources are the sources SetSource parsed, by URL: a run's events name a
// few topics, and parsing a URL for each of them costs more than the rest
// of the event (docs/chaos.md).
var sources sync.Map // string → types.URIRef

// setSource is e.SetSource(src) on an event cloudevents.New made, with the
// URL parsed once (TestCloudEventSource).
func setSource(e *cloudevents.Event, src string) {
	ec, ok := e.Context.(*cloudevents.EventContextV1)
	if !ok {
		e.SetSource(src)
		return
	}
	if ref, ok := sources.Load(src); ok {
		ec.Source = ref.(types.URIRef)
		return
	}
	e.SetSource(src)
	if _, failed := e.FieldErrors["source"]; !failed {
		sources.Store(src, ec.Source)
	}
}

// plainJSON reports whether encoding/json writes s as it is between
// quotes: printable ASCII other than a double quote, a backslash and the
// HTML characters it escapes ('<', '>', '&').
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// Deliver hands one message to the function that reads its topic and
// returns the function's result (nil: acknowledged).
func (h *Harness) Deliver(ctx context.Context, topic, id string, data []byte) error {
	e := CloudEvent(topic, id, data, nil)
	switch topic {
	case config.TopicJobs, config.TopicClusterSpec:
		return h.ScaleUp.Handle(ctx, e)
	case config.TopicExpiry:
		return h.Expiry.Handle(ctx, e)
	case config.TopicHealthFailure:
		return h.Repair.Handle(ctx, e)
	case config.TopicReconcile, config.TopicSlurmSnapshot:
		return h.Reconcile.Handle(ctx, e)
	}
	return fmt.Errorf("no function reads topic %s", topic)
}

// NewID returns a fresh message id.
func (h *Harness) NewID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	return fmt.Sprintf("msg-%d", h.nextID)
}

// Publish delivers a payload as a new message (fresh id) and returns its id.
func (h *Harness) Publish(ctx context.Context, topic string, payload any) (string, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return "", err
	}
	id := h.NewID()
	return id, h.Deliver(ctx, topic, id, data)
}

// Apply publishes a cluster.applied event for a spec.
func (h *Harness) Apply(ctx context.Context, c *spec.Cluster) error {
	return h.ApplyWith(ctx, c, NodeSettings(c))
}

// ApplyWith publishes a cluster.applied event for a spec with the given
// (resolved) node settings.
func (h *Harness) ApplyWith(ctx context.Context, c *spec.Cluster, node nodeconfig.Settings) error {
	eff, err := c.EffectiveJSON()
	if err != nil {
		return err
	}
	_, err = h.Publish(ctx, config.TopicClusterSpec, event.Cluster{
		Header: event.Header{Version: 1, Type: event.TypeClusterApply, Cluster: c.ID}, Spec: eff, Node: &node, AppliedAt: h.Clock.Now()})
	return err
}

// NodeSettings are the node settings the simulated system applies with a
// spec: the simulator's default Slurm GPU image, and a node service
// account, controller, munge-key secret and home mount of the cluster's
// project.
func NodeSettings(c *spec.Cluster) nodeconfig.Settings {
	return nodeconfig.Settings{
		Image:          computesim.SlurmGPUImage,
		ServiceAccount: "flexslurm-node@" + c.Project + ".iam.gserviceaccount.com",
		ConfServer:     c.ID + "-controller",
		MungeKeySecret: "projects/" + c.Project + "/secrets/" + c.ID + "-munge-key/versions/latest",
		Home:           nodeconfig.Mount{Storage: c.Slurm.HomeDirectoryStorage, Type: nodeconfig.MountNFS, Source: "10.0.0.2:/home", Dir: "/home"},
		Topics:         nodeconfig.Topics{Jobs: config.TopicJobs, Health: config.TopicHealthFailure},
	}
}

// TakeAudit returns and forgets the audit entries the simulator wrote.
func (h *Harness) TakeAudit() []Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.audit
	h.audit = nil
	for i := range out {
		h.nextID++
		out[i].ID = fmt.Sprintf("audit-%d", h.nextID)
	}
	return out
}

// DeliverAudit hands every pending audit entry to the Expiry function.
func (h *Harness) DeliverAudit(ctx context.Context) error {
	for _, m := range h.TakeAudit() {
		if err := h.Deliver(ctx, config.TopicExpiry, m.ID, m.Data); err != nil {
			return err
		}
	}
	return nil
}

// Tick delivers one reconcile tick.
func (h *Harness) Tick(ctx context.Context) error {
	_, err := h.Publish(ctx, config.TopicReconcile, event.Tick{Header: event.Header{Version: 1, Type: event.TypeReconcileTick}})
	return err
}

// Advance moves the clock by d, stepping the simulator through every
// transition due on the way (each at its own time), and delivers the audit
// entries they produce to the Expiry function.
func (h *Harness) Advance(ctx context.Context, d time.Duration) error {
	end := h.Clock.Now().Add(d)
	for {
		next, ok := h.Sim.NextDue()
		if !ok || next.After(end) {
			break
		}
		h.Clock.Set(next)
		h.Sim.Tick(next)
		if err := h.DeliverAudit(ctx); err != nil {
			return err
		}
	}
	h.Clock.Set(end)
	h.Sim.Tick(end)
	return h.DeliverAudit(ctx)
}

// VMs returns the names of the simulator's VMs that are not being deleted, sorted.
func (h *Harness) VMs() []string {
	var out []string
	for _, vm := range h.Sim.Instances() {
		if vm.Status != "STOPPING" {
			out = append(out, vm.Name)
		}
	}
	sort.Strings(out)
	return out
}
