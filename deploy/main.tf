# flexslurm on Google Cloud: the Pub/Sub topics and dead-letter topics, the
# log sink that turns Compute Engine's audit logs into expiry events, the
# reconcile schedule, the Firestore database and the four gen2 functions,
# each running as its own service account. README.md lists every role
# granted here and why; deploy_test.go checks this configuration against the
# code (entry points, topics, environment) and against that list.

locals {
  # The cluster spec that `flexslurm apply` publishes once the functions run.
  cluster = jsondecode(file(var.cluster_spec_file))

  # Topic ids, exactly as in shared/config.
  topics = toset([
    "job-pending",           # Slurm hooks: job lifecycle → ScaleUp
    "cluster-spec",          # flexslurm apply: cluster.applied → ScaleUp
    "instance-expiry",       # the log sink: Compute audit logs → Expiry
    "health-failure",        # node hooks: failed health checks → Repair
    "reconcile-tick",        # Cloud Scheduler → Reconcile
    "slurm-snapshot",        # the Slurm agent's periodic snapshot → Reconcile
    "slurm-commands",        # every function → the Slurm agent
    "slurm-command-results", # the Slurm agent's command reports (operators)
  ])

  # One deployment per (entry point, trigger topic). The root package is
  # deployed once per entry; ScaleUp and Reconcile read two topics each.
  # identity names the service account the deployment runs as.
  functions = {
    scaleup-jobs    = { entry_point = "ScaleUp", topic = "job-pending", identity = "scaleup" }
    scaleup-spec    = { entry_point = "ScaleUp", topic = "cluster-spec", identity = "scaleup" }
    expiry          = { entry_point = "Expiry", topic = "instance-expiry", identity = "expiry" }
    repair          = { entry_point = "Repair", topic = "health-failure", identity = "repair" }
    reconcile-tick  = { entry_point = "Reconcile", topic = "reconcile-tick", identity = "reconcile" }
    reconcile-slurm = { entry_point = "Reconcile", topic = "slurm-snapshot", identity = "reconcile" }
  }

  # One runtime service account per entry point (the API function's too,
  # deploy/api.tf).
  identities = toset(concat([for f in local.functions : f.identity], ["api"]))

  # Topics whose subscriptions forward undeliverable messages to
  # "<topic>-dead-letter", held there by the subscription of the same name
  # (shared/status.ConsumedTopics): the function triggers and the Slurm
  # agent's commands.
  dead_lettered = toset(concat([for f in local.functions : f.topic], ["slurm-commands"]))

  # The Slurm side (hooks and agent beside slurmctld) publishes to these.
  slurm_publishes = toset(["job-pending", "slurm-snapshot", "slurm-command-results"])

  # The Pub/Sub service agent forwards dead letters: it publishes to the
  # dead-letter topics and acknowledges on the source subscriptions.
  pubsub_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.${var.service_agent_domain}"

  firestore_location = var.firestore_location != "" ? var.firestore_location : var.region

  # The functions' environment: shared/config's variables.
  function_env = merge(
    {
      GOOGLE_CLOUD_PROJECT         = var.project
      FLEXSLURM_FIRESTORE_DATABASE = var.firestore_database
      FLEXSLURM_SLURM_TOPIC        = "slurm-commands"
      FLEXSLURM_LOG_LEVEL          = var.log_level
      FLEXSLURM_CONTROLLER_VM      = var.controller_instance
      FLEXSLURM_RESIZE_REQUEST_API = var.resize_request_api
      FLEXSLURM_END_WARNING        = var.end_warning
      FLEXSLURM_END_SIGNAL         = var.end_signal
    },
    var.universe_domain == "googleapis.com" ? {} : { GOOGLE_CLOUD_UNIVERSE_DOMAIN = var.universe_domain },
    var.repair_node_limit == "" ? {} : { FLEXSLURM_REPAIR_NODE_LIMIT = var.repair_node_limit },
    var.repair_node_window == "" ? {} : { FLEXSLURM_REPAIR_NODE_WINDOW = var.repair_node_window },
  )

  # The APIs the deployment and the functions call.
  services = toset([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "cloudscheduler.googleapis.com",
    "compute.googleapis.com",
    "eventarc.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
  ])
}

data "google_project" "this" {
  project_id = var.project
}

resource "google_project_service" "api" {
  for_each           = local.services
  project            = var.project
  service            = each.key
  disable_on_destroy = false
}
