# The API function: the modelDevelopmentClusters REST surface (shared/api,
# docs/api.md) as one HTTP entry point of the same source upload. Cloud Run
# admits only callers with roles/run.invoker on its service: the members of
# var.api_invokers and no one else (never allUsers or
# allAuthenticatedUsers). It runs as google_service_account.function["api"]
# (local.identities), which holds the Firestore, Compute and slurm-commands
# grants every function account gets, for the code this entry point may run
# (computeiam_test.go), and may publish cluster specs.

locals {
  # The node settings `flexslurm apply --node-settings` reads; the API
  # function applies them to the specs it is sent (FLEXSLURM_NODE_SETTINGS).
  node_settings = {
    image            = var.node_image
    service_account  = google_service_account.node.email
    conf_server      = local.conf_server
    munge_key_secret = "projects/${var.project}/secrets/${google_secret_manager_secret.munge_key.secret_id}/versions/latest"
    home = {
      storage = local.cluster.orchestrator_spec.slurm_spec.home_directory_storage
      type    = "nfs"
      source  = var.home_nfs_source
      dir     = "/home"
    }
    topics = {
      jobs   = google_pubsub_topic.topic["job-pending"].name
      health = google_pubsub_topic.topic["health-failure"].name
    }
    binary_url = var.node_binary_url
  }
}

resource "google_cloudfunctions2_function" "api" {
  project     = var.project
  location    = var.region
  name        = "${var.name_prefix}-api"
  description = "flexslurm API: the modelDevelopmentClusters REST surface (callers need roles/run.invoker)"

  build_config {
    runtime           = "go126"
    entry_point       = "API"
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id

    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    available_memory = var.function_memory
    timeout_seconds  = var.function_timeout_seconds
    # Scale to zero between calls; a few instances serve an operator's calls.
    min_instance_count             = 0
    max_instance_count             = var.function_max_instances
    ingress_settings               = "ALLOW_ALL"
    all_traffic_on_latest_revision = true
    service_account_email          = google_service_account.function["api"].email
    environment_variables = merge(local.function_env, {
      FLEXSLURM_NODE_SETTINGS = jsonencode(local.node_settings)
    })
  }

  depends_on = [
    google_project_service.api,
    google_project_iam_member.build_logs,
    google_artifact_registry_repository_iam_member.build_push,
    google_storage_bucket_iam_member.build_source,
    google_project_iam_member.function_firestore,
    google_project_iam_member.function_compute,
  ]
}

# Who may call the API: the invoker role on its Cloud Run service, for the
# listed members only
# (https://cloud.google.com/functions/docs/securing/authenticating).
resource "google_cloud_run_v2_service_iam_member" "api_invoker" {
  for_each = toset(var.api_invokers)
  project  = var.project
  location = var.region
  name     = google_cloudfunctions2_function.api.service_config[0].service
  role     = "roles/run.invoker"
  member   = each.value
}

# The API publishes the cluster specs it is sent, as `flexslurm apply`
# does without it.
resource "google_pubsub_topic_iam_member" "api_cluster_spec" {
  project = var.project
  topic   = google_pubsub_topic.topic["cluster-spec"].name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.function["api"].member
}
