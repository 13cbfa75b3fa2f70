# Event sources that are not flexslurm code: the log sink feeding Expiry and
# the schedule feeding Reconcile.

locals {
  # Compute Engine's own VM terminations are System Event audit logs
  # (methodName without a version prefix: compute.instances.preempted,
  # hostError, deferredDelete and deferredStop at the max run duration, …);
  # VM deletes, including those a MIG makes at the end of a resize request's
  # run duration, are Admin Activity logs whose method carries the API
  # version the caller used (v1.compute.instances.delete,
  # beta.compute.instances.delete, …), matched by the decoder's own pattern
  # (shared/event DeleteMethodPattern; https://cloud.google.com/compute/docs/logging/audit-logging).
  # deploy/logfilter_test.go runs this filter over recorded entries.
  expiry_log_filter = <<-EOT
    (logName="projects/${var.project}/logs/cloudaudit.googleapis.com%2Fsystem_event"
      AND protoPayload.serviceName="compute.googleapis.com"
      AND resource.type="gce_instance")
    OR
    (logName="projects/${var.project}/logs/cloudaudit.googleapis.com%2Factivity"
      AND protoPayload.serviceName="compute.googleapis.com"
      AND protoPayload.methodName=~"^[a-z0-9]+[.]compute[.]instances[.]delete$")
  EOT
}

resource "google_logging_project_sink" "expiry" {
  project                = var.project
  name                   = "${var.name_prefix}-instance-expiry"
  description            = "Compute Engine VM terminations and deletes, for the flexslurm Expiry function."
  destination            = "pubsub.googleapis.com/${google_pubsub_topic.topic["instance-expiry"].id}"
  filter                 = local.expiry_log_filter
  unique_writer_identity = true

  depends_on = [google_project_service.api]
}

# The sink writes as its own identity, which must be able to publish.
resource "google_pubsub_topic_iam_member" "sink_publisher" {
  project = var.project
  topic   = google_pubsub_topic.topic["instance-expiry"].name
  role    = "roles/pubsub.publisher"
  member  = google_logging_project_sink.expiry.writer_identity
}

# The reconcile tick: {"type":"reconcile.tick","version":1} for every
# cluster (no cluster attribute), as `flexslurm local` publishes it.
resource "google_cloud_scheduler_job" "reconcile" {
  project     = var.project
  region      = var.region
  name        = "${var.name_prefix}-reconcile"
  description = "Periodic reconcile of every flexslurm cluster."
  schedule    = var.reconcile_schedule
  time_zone   = var.scheduler_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.topic["reconcile-tick"].id
    data       = base64encode(jsonencode({ version = 1, type = "reconcile.tick" }))
  }

  depends_on = [google_project_service.api]
}
