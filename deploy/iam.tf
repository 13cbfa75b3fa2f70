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

# Functions: instance templates, managed instance groups, resize requests,
# VM deletes and host-fault reports in the node pools' zones.
resource "google_project_iam_member" "function_compute" {
  for_each = local.identities
  project  = var.project
  role     = "roles/compute.instanceAdmin.v1"
  member   = google_service_account.function[each.key].member
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
