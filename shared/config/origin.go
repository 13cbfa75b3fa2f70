package config

// Who may make flexslurm do what, by topic: the one table the functions
// enforce (shared/event CheckOrigin), deploy/ subscribes and grants by, and
// deploy/deploy_test.go holds Terraform to (docs/security.md, "Who may
// publish what").

// Entry point names, as given to --entry-point and registered by the
// repository root's functions.go.
const (
	EntryScaleUp   = "ScaleUp"
	EntryExpiry    = "Expiry"
	EntryRepair    = "Repair"
	EntryReconcile = "Reconcile"
)

// EntryTopics are the topics each entry point reads. A message that reaches
// an entry point from any other topic is refused; each deployment of an
// entry point is triggered by exactly one of its topics.
var EntryTopics = map[string][]string{
	EntryScaleUp:   {TopicJobs, TopicClusterSpec},
	EntryExpiry:    {TopicExpiry},
	EntryRepair:    {TopicHealthFailure},
	EntryReconcile: {TopicReconcile, TopicSlurmSnapshot},
}

// Publishing identities: who may publish to a topic (TopicPublishers).
const (
	// PublisherOperator is the operator's own identity: `flexslurm apply`
	// (a cluster spec). No service account this deployment creates.
	PublisherOperator = "operator"
	// PublisherSlurm is the Slurm controller's account: the controller
	// hooks (job lifecycle, power reports) and the agent (snapshots,
	// command results).
	PublisherSlurm = "slurm"
	// PublisherNode is the node VMs' account: the node hooks (health
	// checks) and the bootstrap (node.bootstrap_failed, node.version_mismatch).
	PublisherNode = "node"
	// PublisherFunction is each function's runtime account (Slurm commands).
	PublisherFunction = "function"
	// PublisherSink is the expiry log sink's writer identity.
	PublisherSink = "sink"
	// PublisherScheduler is Cloud Scheduler (the reconcile tick), which
	// publishes as its own service agent.
	PublisherScheduler = "scheduler"
	// PublisherAPI is the API function's account (shared/api): the cluster
	// specs callers with the invoker role send it.
	PublisherAPI = "api"
)

// TopicPublishers are the identities that may publish to each topic.
// Nothing else is granted publish on a topic; a spec reaches ScaleUp only
// from the operator, directly or through the API function.
var TopicPublishers = map[string][]string{
	TopicJobs:           {PublisherSlurm, PublisherNode},
	TopicClusterSpec:    {PublisherOperator, PublisherAPI},
	TopicExpiry:         {PublisherSink},
	TopicHealthFailure:  {PublisherNode},
	TopicReconcile:      {PublisherScheduler},
	TopicSlurmCommands:  {PublisherFunction},
	TopicSlurmSnapshot:  {PublisherSlurm},
	TopicCommandResults: {PublisherSlurm},
}
