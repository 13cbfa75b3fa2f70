# The four entry points registered in ../functions.go, deployed from one
# upload of the repository root (the Go buildpack builds the root package,
# which registers every entry point; --entry-point picks one).

locals {
  # .gcloudignore, in archive_file's glob form: a pattern without an inner
  # slash matches at any depth (gitignore), a directory pattern matches what
  # is under it. Negations are not supported (checked below).
  gcloudignore = [
    for l in split("\n", file("${path.module}/../.gcloudignore")) :
    trimsuffix(trimprefix(trimspace(l), "/"), "/")
    if trimspace(l) != "" && substr(trimspace(l), 0, 1) != "#"
  ]
  source_excludes = distinct(concat(
    flatten([
      for p in local.gcloudignore :
      strcontains(p, "/") ? [p, "${p}/**"] : ["**/${p}", "**/${p}/**"]
    ]),
    # Local state gcloud would not see either (.gitignore'd).
    ["**/.run/**", "**/.terraform/**", "**/*.tfstate*"],
  ))
}

data "archive_file" "source" {
  type        = "zip"
  source_dir  = "${path.module}/.."
  output_path = "${path.module}/.build/source.zip"
  excludes    = local.source_excludes

  lifecycle {
    precondition {
      condition     = length([for p in local.gcloudignore : p if substr(p, 0, 1) == "!"]) == 0
      error_message = ".gcloudignore negations (!pattern) are not supported by this archive."
    }
  }
}

# Bucket names are global: the project number keeps them unique, and is
# valid where the project id is not (S3NS ids contain a colon).
resource "google_storage_bucket" "source" {
  project                     = var.project
  name                        = "${data.google_project.this.number}-${var.name_prefix}-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true

  depends_on = [google_project_service.api]
}

# Named by content, so a changed source is a new object and every function
# is rebuilt from it.
resource "google_storage_bucket_object" "source" {
  bucket = google_storage_bucket.source.name
  name   = "source-${data.archive_file.source.output_sha256}.zip"
  source = data.archive_file.source.output_path
}

resource "google_artifact_registry_repository" "functions" {
  project       = var.project
  location      = var.region
  repository_id = "${var.name_prefix}-functions"
  format        = "DOCKER"
  description   = "flexslurm function images"

  depends_on = [google_project_service.api]
}

resource "google_cloudfunctions2_function" "fn" {
  for_each    = local.functions
  project     = var.project
  location    = var.region
  name        = "${var.name_prefix}-${each.key}"
  description = "flexslurm ${each.value.entry_point}, triggered by ${each.value.topic}"

  build_config {
    runtime           = "go126"
    entry_point       = each.value.entry_point
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id
    # The version `flexslurm version` reports and the instance templates
    # record (shared/version), passed to go build by the Go buildpack.
    environment_variables = var.flexslurm_version == "" ? {} : {
      GOOGLE_GOLDFLAGS = "-X github.com/flexslurm/flexslurm/shared/version.Version=${var.flexslurm_version}"
    }

    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    available_memory               = var.function_memory
    timeout_seconds                = var.function_timeout_seconds
    min_instance_count             = 0
    max_instance_count             = var.function_max_instances
    ingress_settings               = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision = true
    service_account_email          = google_service_account.function[each.value.identity].email
    environment_variables          = local.function_env
  }

  event_trigger {
    trigger_region        = var.region
    event_type            = "google.cloud.pubsub.topic.v1.messagePublished"
    pubsub_topic          = google_pubsub_topic.topic[each.value.topic].id
    retry_policy          = "RETRY_POLICY_RETRY"
    service_account_email = google_service_account.function[each.value.identity].email
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
