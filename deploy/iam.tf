# Service accounts and their roles. Every grant is listed with its reason in
# README.md ("Roles granted by this configuration"); deploy_test.go fails
# when a role here is missing there or the other way round.

# One runtime identity per entry point (ScaleUp's two deployments share
# one). Each also delivers its own triggers' events (Eventarc trigger
# identity).
resource "google_service_account" "function" {
  for_each     = local.identities
  project      = var.project
  account_id   = "${var.name_prefix}-${each.key}"
  display_name = "flexslurm ${each.key} function"
  description  = "Runtime and trigger identity of the ${each.key} Cloud Function."
}

# The Slurm side: the hooks (job-pending, health-failure) and the agent
# beside slurmctld (slurm-snapshot, slurm-command-results, slurm-commands).
resource "google_service_account" "slurm" {
  project      = var.project
  account_id   = "${var.name_prefix}-slurm"
  display_name = "flexslurm Slurm hooks and agent"
  description  = "Publishes job, health and snapshot events; pulls Slurm commands."
}

# Builds the functions' images from the uploaded source.
resource "google_service_account" "build" {
  project      = var.project
  account_id   = "${var.name_prefix}-build"
  display_name = "flexslurm function builds"
  description  = "Cloud Build identity of the flexslurm function builds."
}

# Functions: the state, in flexslurm's database only.
resource "google_project_iam_member" "function_firestore" {
  for_each = local.identities
  project  = var.project
  role     = "roles/datastore.user"
  member   = google_service_account.function[each.key].member

  condition {
    title       = "flexslurm-database"
    description = "Only the flexslurm Firestore database."
    expression  = "resource.name == \"projects/${data.google_project.this.project_id}/databases/${var.firestore_database}\""
  }
}

# Functions: Compute Engine, least privilege. Each function account gets two
# custom roles holding exactly the Compute permissions its entry point's code
# may use (computeiam_test.go derives them from the code and fails when these
# lists differ), split by where Compute checks them:
#   - on instances and instance templates, resource types that accept IAM
#     Conditions on their names: granted for this cluster's names only;
#   - on managed instance groups (which hold their resize requests), on
#     operations and on the project (lists, creates), which no condition on
#     a resource name can scope: granted without a condition.
# The executor's name-and-label guard (shared/apply) is the second wall.
locals {
  compute_cluster_permissions = [
    "compute.instanceTemplates.useReadOnly", # MIG insert (one MIG per resize request)
    "compute.instances.get",                 # read a VM's labels before acting on it
    "compute.instances.reportHostAsFaulty",  # host repair
    "compute.instances.start",               # restart a host-repaired VM
  ]
  compute_project_permissions = [
    "compute.globalOperations.get",         # wait for a template insert
    "compute.instanceGroupManagers.create", # the MIG of each resize request
    "compute.instanceGroupManagers.delete", # a request's MIG once it serves no node; the pool's MIG of the earlier layout
    "compute.instanceGroupManagers.get",    # resize request get
    "compute.instanceGroupManagers.list",   # read a MIG's description before deleting it (the executor's guard)
    "compute.instanceGroupManagers.update", # deleteInstances, resize request insert/cancel/delete
    "compute.instanceTemplates.create",     # a pool's template
    "compute.zoneOperations.get",           # wait for zonal operations
    "compute.regionOperations.get",         # wait for a workload policy insert (compact placement)
    "compute.resourcePolicies.create",      # a pool's workload policy (compact placement)
    "compute.resourcePolicies.get",         # read back a workload policy that exists
    "compute.resourcePolicies.use",         # a request MIG that references its pool's workload policy
  ]
  # Only the reconciler lists what Compute has (shared/apply Observe):
  # resize requests (instanceGroupManagers.get, above), VMs, and MIGs
  # (instanceGroupManagers.list, above).
  compute_list_permissions = [
    "compute.instances.list",
  ]
  # The API function (deploy/api.tf) resolves image families as `flexslurm
  # apply` does and starts repairs (the executor's permissions above). It
  # deletes nothing itself: a deleted cluster's pools are released by
  # ScaleUp and the reconciler, its templates by `flexslurm teardown`.
  compute_api_project_permissions = [
    "compute.images.get",           # resolve a pool's node_image
    "compute.images.getFromFamily", # resolve an image family
  ]
  compute_permissions = {
    api       = { cluster = local.compute_cluster_permissions, project = concat(local.compute_project_permissions, local.compute_api_project_permissions) }
    scaleup   = { cluster = local.compute_cluster_permissions, project = local.compute_project_permissions }
    expiry    = { cluster = local.compute_cluster_permissions, project = local.compute_project_permissions }
    repair    = { cluster = local.compute_cluster_permissions, project = local.compute_project_permissions }
    reconcile = { cluster = local.compute_cluster_permissions, project = concat(local.compute_project_permissions, local.compute_list_permissions) }
  }

  # This cluster's VMs ("CLUSTER-POOL-INDEX-gGENERATION", in the pools'
  # zones) and instance templates ("fs-CLUSTER-POOL-HASH"): shared/naming.
  # Cluster ids hold no hyphen, so "CLUSTER-" names no other cluster's.
  pool_zones = distinct([for p in local.cluster.node_pools : p.zone])
  compute_cluster_condition = join(" || ", concat(
    [for z in local.pool_zones : "(resource.type == \"compute.googleapis.com/Instance\" && resource.name.startsWith(\"projects/${data.google_project.this.project_id}/zones/${z}/instances/${local.cluster_id}-\"))"],
    ["(resource.type == \"compute.googleapis.com/InstanceTemplate\" && resource.name.startsWith(\"projects/${data.google_project.this.project_id}/global/instanceTemplates/fs-${local.cluster_id}-\"))"],
  ))
}

resource "google_project_iam_custom_role" "function_compute_project" {
  for_each    = local.identities
  project     = var.project
  role_id     = "${replace(var.name_prefix, "-", "_")}_${each.key}_compute_project"
  title       = "flexslurm ${each.key}: Compute, project-wide"
  description = "What the ${each.key} function calls on managed instance groups, operations and the project (deploy/README.md)."
  permissions = local.compute_permissions[each.key].project
}

resource "google_project_iam_custom_role" "function_compute_cluster" {
  for_each    = local.identities
  project     = var.project
  role_id     = "${replace(var.name_prefix, "-", "_")}_${each.key}_compute_cluster"
  title       = "flexslurm ${each.key}: Compute, this cluster's VMs and templates"
  description = "What the ${each.key} function calls on instances and instance templates; granted for the cluster's names only (deploy/README.md)."
  permissions = local.compute_permissions[each.key].cluster
}

resource "google_project_iam_member" "function_compute_project" {
  for_each = local.identities
  project  = var.project
  role     = google_project_iam_custom_role.function_compute_project[each.key].name
  member   = google_service_account.function[each.key].member
}

resource "google_project_iam_member" "function_compute_cluster" {
  for_each = local.identities
  project  = var.project
  role     = google_project_iam_custom_role.function_compute_cluster[each.key].name
  member   = google_service_account.function[each.key].member

  condition {
    title       = "flexslurm-cluster-${local.cluster_id}"
    description = "Only cluster ${local.cluster_id}'s VMs and instance templates."
    expression  = local.compute_cluster_condition
  }
}

# Functions: commands for the Slurm agent.
resource "google_pubsub_topic_iam_member" "function_slurm_commands" {
  for_each = local.identities
  project  = var.project
  topic    = google_pubsub_topic.topic["slurm-commands"].name
  role     = "roles/pubsub.publisher"
  member   = google_service_account.function[each.key].member
}

# Functions: Eventarc pushes each trigger's events as the function's own
# account, which may invoke that function's service and no other.
resource "google_cloud_run_v2_service_iam_member" "function_invoker" {
  for_each = local.functions
  project  = var.project
  location = var.region
  name     = google_cloudfunctions2_function.fn[each.key].service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.function[each.value.identity].member
}

# Slurm side: publish job, health, snapshot and command-result events.
resource "google_pubsub_topic_iam_member" "slurm_publisher" {
  for_each = local.slurm_publishes
  project  = var.project
  topic    = google_pubsub_topic.topic[each.key].name
  role     = "roles/pubsub.publisher"
  member   = google_service_account.slurm.member
}

# Slurm side: pull and acknowledge its commands.
resource "google_pubsub_subscription_iam_member" "slurm_subscriber" {
  project      = var.project
  subscription = google_pubsub_subscription.slurm_commands.name
  role         = "roles/pubsub.subscriber"
  member       = google_service_account.slurm.member
}

# Builds: write build logs.
resource "google_project_iam_member" "build_logs" {
  project = var.project
  role    = "roles/logging.logWriter"
  member  = google_service_account.build.member
}

# Builds: push the function images to flexslurm's repository only.
resource "google_artifact_registry_repository_iam_member" "build_push" {
  project    = var.project
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}

# Builds: read the uploaded source archive.
resource "google_storage_bucket_iam_member" "build_source" {
  bucket = google_storage_bucket.source.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}
