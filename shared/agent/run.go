package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	pubsubv2 "cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Defaults of Options.
const (
	// DefaultSubscription is the agent's pull subscription on the commands
	// topic, as deploy/pubsub.tf creates it (google_pubsub_subscription
	// "slurm_commands").
	DefaultSubscription   = "slurm-commands-agent"
	DefaultLedgerPath     = "/var/lib/flexslurm/agent-ledger.json"
	DefaultSnapshotEvery  = 30 * time.Second
	DefaultPublishTimeout = 10 * time.Second
	DefaultRetryDelay     = 5 * time.Second
	// DefaultPromptSnapshot: a snapshot follows a node's state change this
	// soon (Options.PromptSnapshot).
	DefaultPromptSnapshot = time.Second
)

// Options configures Run.
type Options struct {
	// Spec is the cluster spec: the agent acts on its Flex-Start nodes
	// only. Required.
	Spec *spec.Cluster
	// Project is the Google Cloud project of the topics. Required.
	Project string
	// Subscription is the agent's pull subscription on CommandsTopic:
	// DefaultSubscription when empty.
	Subscription string
	// CreateSubscription creates Subscription, CommandsTopic, ResultsTopic
	// and SnapshotTopic when they are missing. Only the local system and
	// tests set it: on Google Cloud, deploy/ creates them, and the agent's
	// service account holds roles/pubsub.subscriber on the subscription
	// and roles/pubsub.publisher on the topics it publishes to
	// (deploy/iam.tf), which allow neither.
	CreateSubscription bool
	// Identity names the agent's credentials in permission errors: "the
	// agent's service account" when empty.
	Identity string
	// CommandsTopic, ResultsTopic and SnapshotTopic: the config.Topic*
	// constants when empty.
	CommandsTopic, ResultsTopic, SnapshotTopic string
	// SnapshotEvery is the snapshot period: DefaultSnapshotEvery when zero,
	// no snapshots when negative.
	SnapshotEvery time.Duration
	// PromptSnapshot: after a command that changed a node's state in Slurm
	// (promptsSnapshot: a drain, a power down, …), a snapshot is published
	// this long after it, besides the periodic ones, so that the decision
	// waiting to see the change (a repair waits for Slurm to show its node
	// drained) is taken within about a second rather than a period.
	// Commands that come meanwhile share that snapshot, so there is at most
	// one such snapshot per PromptSnapshot. DefaultPromptSnapshot when
	// zero; none when negative or when SnapshotEvery is.
	PromptSnapshot time.Duration
	// LedgerPath is the command ledger: DefaultLedgerPath when empty.
	LedgerPath string
	// SpoolDir is the hooks' spool, published at every snapshot tick; the
	// agent spools its own command results there too. Empty: no spool.
	SpoolDir string
	// MetadataHost is the metadata server (host:port) the agent fetches the
	// controller's identity token from when it publishes the hooks'
	// spooled reports; "" is GCE_METADATA_HOST's or Compute Engine's.
	MetadataHost string
	// SpoolSenders are the users whose spool directories the agent
	// publishes, with what each may send (hooks.SpoolPolicy): its own user
	// as a controller when nil. The agent runs as the SlurmUser, which can
	// read its own directory only; as root it reads only those named here.
	SpoolSenders hooks.SpoolSenders
	// JobsTopic is the topic of the controller hooks' job and node events,
	// which the agent publishes from the spool: config.TopicJobs when
	// empty.
	JobsTopic string
	// PublishTimeout bounds each publish: DefaultPublishTimeout when zero.
	PublishTimeout time.Duration
	// RetryDelay is how long a command deferred with ErrRetry waits before
	// it is handed back to Pub/Sub: DefaultRetryDelay when zero.
	RetryDelay time.Duration
	// SlurmConf are the options of the slurm.conf lines the agent names
	// when Slurm's configuration cannot serve Spec (`flexslurm slurm-conf`'s
	// HookDir, NodeHookDir, DefaultTime, …): at every snapshot it compares
	// Spec with the configuration slurmctld runs with, logs each
	// divergence at error level and carries them in the snapshot
	// (event.ConfigCheck), which `flexslurm status` shows.
	SlurmConf slurm.GenOptions
	// Slurm runs the Slurm commands; a default Runner when nil.
	Slurm *slurm.Runner
	// Log receives the agent's log; slog.Default() when nil.
	Log *slog.Logger
	// Now is the clock that stamps snapshots and results: time.Now when
	// nil. The local system passes its simulated clock, so that the
	// reconciler judges a snapshot's age on its own clock.
	Now func() time.Time
	// Ready, when set, is called once the subscription exists and
	// commands are being received.
	Ready func()
}

func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.Spec == nil {
		errs = append(errs, errors.New("the cluster spec is required"))
	}
	if o.Project == "" {
		errs = append(errs, errors.New("the project is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if o.Subscription == "" {
		o.Subscription = DefaultSubscription
	}
	if o.Identity == "" {
		o.Identity = "the agent's service account"
	}
	if o.CommandsTopic == "" {
		o.CommandsTopic = config.TopicSlurmCommands
	}
	if o.ResultsTopic == "" {
		o.ResultsTopic = config.TopicCommandResults
	}
	if o.SnapshotTopic == "" {
		o.SnapshotTopic = config.TopicSlurmSnapshot
	}
	if o.JobsTopic == "" {
		o.JobsTopic = config.TopicJobs
	}
	if o.SpoolSenders == nil {
		o.SpoolSenders = hooks.SpoolSenders{os.Geteuid(): {hooks.RoleController}}
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = DefaultSnapshotEvery
	}
	if o.PromptSnapshot == 0 {
		o.PromptSnapshot = DefaultPromptSnapshot
	}
	if o.LedgerPath == "" {
		o.LedgerPath = DefaultLedgerPath
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = DefaultPublishTimeout
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.Slurm == nil {
		o.Slurm = &slurm.Runner{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o, nil
}

// Run runs the agent until ctx ends: it applies each command it receives
// on its subscription (created first, with the topics, only with
// CreateSubscription), one at a time, publishing a result for each, and
// publishes a snapshot (and flushes the hooks' spool) every SnapshotEvery.
// It returns nil when ctx ends, the error that kept it from starting, or
// one that retrying cannot cure: a missing subscription, or a
// PermissionDenied on it (a *pubsub.PermissionError naming the role and
// the subscription). A PermissionDenied while publishing is logged as a
// *pubsub.PermissionError naming the role and the topic (the message
// stays spooled when there is a spool).
func Run(ctx context.Context, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return fmt.Errorf("flexslurm agent: %w", err)
	}
	ledger, err := OpenLedger(o.LedgerPath)
	if err != nil {
		return err
	}
	defer ledger.Close()
	ps, err := pubsub.New(ctx, o.Project)
	if err != nil {
		return err
	}
	defer ps.Close()
	if o.CreateSubscription {
		if err := ps.EnsurePullSubscription(ctx, o.Subscription, o.CommandsTopic); err != nil {
			return err
		}
		for _, t := range []string{o.ResultsTopic, o.SnapshotTopic} {
			if err := ps.EnsureTopic(ctx, t); err != nil {
				return err
			}
		}
	}
	raw, err := pubsubv2.NewClient(ctx, o.Project)
	if err != nil {
		return fmt.Errorf("creating the Pub/Sub subscriber: %w", err)
	}
	defer raw.Close()

	a := &Agent{Cluster: o.Spec.ID, Topology: slurm.TopologyOf(o.Spec), Slurm: o.Slurm, Ledger: ledger, Log: o.Log, Now: o.Now}
	pub := permissionPublisher{pub: ps, project: o.Project, identity: o.Identity}
	out := &hooks.Outbox{Pub: hooks.NewSigningPublisher(pub, o.MetadataHost), Timeout: o.PublishTimeout, Log: o.Log}
	if o.SpoolDir != "" {
		out.Spool = &hooks.Spool{Dir: o.SpoolDir, Log: o.Log, Policy: hooks.SpoolPolicy{Senders: o.SpoolSenders,
			Topics: hooks.SpoolTopics{Jobs: o.JobsTopic, Results: o.ResultsTopic}}}
	}
	r := &runner{o: o, a: a, pub: pub, out: out, soon: make(chan struct{}, 1)}
	r.snapshot = r.publishSnapshot
	if r.conf, err = NewConfigChecker(o.Spec, o.SlurmConf); err != nil {
		o.Log.Error("Slurm's configuration is not compared with the cluster spec", "error", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); r.tick(ctx) }()
	defer func() { cancel(); <-done }()

	sub := raw.Subscriber(o.Subscription)
	sub.ReceiveSettings.NumGoroutines = 1
	sub.ReceiveSettings.MaxOutstandingMessages = 1
	o.Log.Info("flexslurm agent running", "cluster", a.Cluster, "subscription", o.Subscription,
		"nodes", len(a.Topology.NodeNames()), "ledger", o.LedgerPath, "handled", ledger.Len())
	if o.Ready != nil {
		o.Ready()
	}
	for backoff := time.Second; ctx.Err() == nil; backoff = min(2*backoff, time.Minute) {
		err := sub.Receive(ctx, r.receive)
		if ctx.Err() != nil {
			break
		}
		if err := receiveError(err, o); err != nil {
			o.Log.Error("cannot receive commands", "subscription", o.Subscription, "error", err)
			return err
		}
		o.Log.Error("receiving commands; retrying", "subscription", o.Subscription, "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	o.Log.Info("flexslurm agent stopped", "cluster", a.Cluster)
	return nil
}

// receiveError returns the error of Receive that retrying cannot cure, as
// the operator must read it, or nil for one worth retrying. Pulling (and
// acknowledging, which the same role allows) needs roles/pubsub.subscriber
// on the subscription.
func receiveError(err error, o Options) error {
	name := pubsub.SubscriptionName(o.Project, o.Subscription)
	switch status.Code(err) {
	case codes.PermissionDenied:
		return pubsub.Permission(err, o.Identity, pubsub.RoleSubscriber, name)
	case codes.NotFound:
		return fmt.Errorf("subscription %s does not exist: deploy/ creates it (deploy/pubsub.tf), or pass --subscription; the local system creates its own (--create-subscription): %w", name, err)
	}
	return nil
}

// publisher is what the agent publishes through.
type publisher interface {
	Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error)
}

// permissionPublisher tells a PermissionDenied of a publish as the missing
// grant: roles/pubsub.publisher on the topic.
type permissionPublisher struct {
	pub      publisher
	project  string
	identity string
}

func (p permissionPublisher) Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error) {
	id, err := p.pub.Publish(ctx, topic, data, attrs)
	return id, pubsub.Permission(err, p.identity, pubsub.RolePublisher, pubsub.TopicName(p.project, topic))
}

type runner struct {
	o    Options
	a    *Agent
	pub  permissionPublisher
	out  *hooks.Outbox
	conf *ConfigChecker // nil when the spec could not be compared
	// soon asks tick for a prompt snapshot (prompt); snapshot takes and
	// publishes one (publishSnapshot; tests replace it).
	soon     chan struct{}
	snapshot func(ctx context.Context)
}

// promptsSnapshot reports whether a command changes a node's state in a
// way a decision waits to see in a snapshot: flexslurm's drain before a
// repair step, a power down or down before a release, a power up or
// resume, a requeue. Job comments, signals, reservations and addresses
// are not awaited.
func promptsSnapshot(c event.SlurmOp) bool {
	switch c {
	case event.SlurmDrain, event.SlurmDown, event.SlurmPowerDown, event.SlurmPowerDownForce,
		event.SlurmPowerUp, event.SlurmResume, event.SlurmRequeue:
		return true
	}
	return false
}

// prompt asks for a snapshot PromptSnapshot from now; a request already
// waiting covers it.
func (r *runner) prompt() {
	if r.soon == nil || r.o.SnapshotEvery < 0 || r.o.PromptSnapshot < 0 {
		return
	}
	select {
	case r.soon <- struct{}{}:
	default:
	}
}

// receive handles one delivery: commands of other clusters and malformed
// ones are acknowledged (the latter reported when they name this cluster
// and an id), deferred ones handed back after RetryDelay.
func (r *runner) receive(ctx context.Context, m *pubsubv2.Message) {
	c, err := event.DecodeSlurmCommand(m.Data)
	if err != nil {
		r.malformed(ctx, m, err)
		m.Ack()
		return
	}
	if c.Cluster != r.a.Cluster {
		m.Ack()
		return
	}
	res, err := r.a.Handle(ctx, c)
	if err != nil {
		select {
		case <-ctx.Done():
		case <-time.After(r.o.RetryDelay):
		}
		m.Nack()
		return
	}
	r.publish(ctx, r.o.ResultsTopic, event.TypeCommandResult, res)
	m.Ack()
	if res.OK && !res.Skipped && promptsSnapshot(c.Command) {
		r.prompt()
	}
}

// malformed logs an undecodable command and reports it when it names this
// cluster and carries an id.
func (r *runner) malformed(ctx context.Context, m *pubsubv2.Message, err error) {
	r.o.Log.Error("malformed slurm command acknowledged", "message_id", m.ID, "error", err)
	var loose struct {
		Cluster string `json:"cluster"`
		ID      string `json:"id"`
		Command string `json:"command"`
	}
	if json.Unmarshal(m.Data, &loose) != nil || loose.Cluster != r.a.Cluster || loose.ID == "" {
		return
	}
	r.publish(ctx, r.o.ResultsTopic, event.TypeCommandResult, event.CommandResult{
		Header: event.Header{Version: event.SchemaVersion, Type: event.TypeCommandResult, Cluster: r.a.Cluster},
		ID:     text.Truncate(loose.ID, 128), Command: event.SlurmOp(text.Truncate(loose.Command, 64)), OK: false,
		Detail: text.Truncate("malformed command: "+err.Error(), maxDetail), At: r.a.now().UTC(),
	})
}

// publish sends one payload: through the spool when there is one (it is
// retried later), else directly.
func (r *runner) publish(ctx context.Context, topic, typ string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		r.o.Log.Error("encoding "+typ, "error", err)
		return
	}
	msg := hooks.Message{Topic: topic, Data: data, Attributes: map[string]string{"cluster": r.a.Cluster, "type": typ, "source": "agent"}}
	if r.out.Spool != nil {
		if _, err := r.out.Send(ctx, []hooks.Message{msg}); err != nil {
			r.o.Log.Error("publishing "+typ, "error", err)
		}
		return
	}
	pctx, cancel := context.WithTimeout(ctx, r.o.PublishTimeout)
	defer cancel()
	if _, err := r.pub.Publish(pctx, topic, data, msg.Attributes); err != nil {
		r.o.Log.Error("publishing "+typ, "error", err)
	}
}

// tick publishes a snapshot and flushes the spool every SnapshotEvery,
// starting at once, and PromptSnapshot after a prompt.
func (r *runner) tick(ctx context.Context) {
	if r.o.SnapshotEvery < 0 && r.out.Spool == nil {
		return
	}
	every := r.o.SnapshotEvery
	if every < 0 {
		every = DefaultSnapshotEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r.snapshot(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.soon:
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.o.PromptSnapshot):
			}
			// The commands that came meanwhile ran before the snapshot
			// about to be taken: it answers them too.
			select {
			case <-r.soon:
			default:
			}
		}
	}
}

// publishSnapshot flushes the spool and publishes a snapshot.
func (r *runner) publishSnapshot(ctx context.Context) {
	if r.out.Spool != nil {
		if res, err := r.out.Flush(ctx); err != nil || res.Published > 0 {
			r.o.Log.Info("hook spool flushed", "published", res.Published, "still_spooled", res.Spooled, "error", err)
		}
	}
	if r.o.SnapshotEvery <= 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := r.a.Snapshot(sctx)
	if err == nil && r.conf != nil {
		cc, cerr := r.conf.Check(sctx, r.a.Slurm, r.o.Log)
		if cerr != nil {
			r.o.Log.Error("comparing Slurm's configuration with the cluster spec", "error", cerr)
		}
		s.Config = cc
	}
	cancel()
	if err != nil {
		r.o.Log.Error("snapshot", "error", err)
		return
	}
	// A snapshot is superseded by the next one: never spooled.
	data, err := json.Marshal(s)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, r.o.PublishTimeout)
		_, err = r.pub.Publish(pctx, r.o.SnapshotTopic, data, map[string]string{"cluster": r.a.Cluster, "type": event.TypeSlurmSnapshot})
		cancel()
	}
	if err != nil {
		r.o.Log.Error("publishing the snapshot", "error", err)
	} else {
		r.o.Log.Debug("snapshot published", "nodes", len(s.Nodes), "jobs", len(s.Jobs))
	}
}
