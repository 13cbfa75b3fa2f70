# Metrics an operator can alert on (docs/events.md "Cluster events",
# deploy/README.md "Metrics, dashboard and alerts"). They are log-based
# metrics over the functions' structured log lines (shared/logx), so nothing
# in the functions calls Cloud Monitoring:
#
#   - counters: one line per cluster event (jsonPayload.cluster_event) and
#     per Metric action (jsonPayload.metric);
#   - distributions: one line per sample (jsonPayload.sample, .value):
#     capacity waits and decision latency;
#   - gauges: the reconciler logs each pool's gauges once per pass
#     (jsonPayload.gauge, .value; shared/metrics), read as distributions and
#     charted with a max or mean aligner.
#
# Log-based metrics: https://cloud.google.com/logging/docs/logs-based-metrics
# (counter and distribution metrics, label and value extractors);
# Terraform: google_logging_metric. Dead letters need no log: Pub/Sub's own
# subscription/num_undelivered_messages of each <topic>-dead-letter
# subscription is alerted on.

locals {
  # The functions' logs: gen2 functions run as Cloud Run services named
  # "<name_prefix>-<entry>" (functions.tf, api.tf).
  function_logs = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=~\"^${var.name_prefix}-\""

  # Gauges logged by the reconciler (shared/metrics Gauges), by name.
  gauges = {
    nodes                      = "Nodes of a pool by state (requested: waiting for capacity)"
    queued_requests            = "Resize requests of a pool waiting for capacity"
    queued_request_age_seconds = "Age of the pool's oldest queued resize request"
    breaker_open               = "1 while the pool's provisioning breaker is open"
    static_shortfall           = "Static nodes missing below the pool's min_node_count"
  }

  # Samples (shared/apply SampleCapacityWait, SampleDecisionLatency) and
  # the fields of their lines that label them.
  samples = {
    capacity_wait_seconds    = { description = "A VM's wait for capacity, requested to running", labels = ["cluster", "pool"] }
    decision_latency_seconds = { description = "An event's arrival to its decision's last action", labels = ["cluster", "flow"] }
  }
}

resource "google_logging_metric" "cluster_events" {
  project     = var.project
  name        = "flexslurm_cluster_events"
  description = "flexslurm cluster events by type (docs/events.md): VMs, health, repairs, stockouts, backoffs, breakers, refused jobs"
  filter      = "${local.function_logs} AND jsonPayload.cluster_event=~\"^[A-Z_]+$\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "cluster"
      value_type = "STRING"
    }
    labels {
      key        = "pool"
      value_type = "STRING"
    }
    labels {
      key        = "type"
      value_type = "STRING"
    }
  }
  label_extractors = {
    cluster = "EXTRACT(jsonPayload.cluster)"
    pool    = "EXTRACT(jsonPayload.pool)"
    type    = "EXTRACT(jsonPayload.cluster_event)"
  }

  depends_on = [google_project_service.api]
}

resource "google_logging_metric" "counters" {
  project     = var.project
  name        = "flexslurm_counters"
  description = "flexslurm counters (Metric actions: provisioning_errors, host_repairs, repair_fallback, breaker_trips, …) by name and pool"
  filter      = "${local.function_logs} AND jsonPayload.metric=~\"^[a-z_]+$\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "name"
      value_type = "STRING"
    }
    labels {
      key        = "cluster"
      value_type = "STRING"
    }
    labels {
      key        = "pool"
      value_type = "STRING"
    }
  }
  label_extractors = {
    name    = "EXTRACT(jsonPayload.metric)"
    cluster = "EXTRACT(jsonPayload.cluster)"
    pool    = "EXTRACT(jsonPayload.metric_pool)"
  }

  depends_on = [google_project_service.api]
}

resource "google_logging_metric" "samples" {
  for_each    = local.samples
  project     = var.project
  name        = "flexslurm_${each.key}"
  description = each.value.description
  filter      = "${local.function_logs} AND jsonPayload.sample=\"${each.key}\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"
    dynamic "labels" {
      for_each = each.value.labels
      content {
        key        = labels.value
        value_type = "STRING"
      }
    }
  }
  value_extractor  = "EXTRACT(jsonPayload.value)"
  label_extractors = { for l in each.value.labels : l => "EXTRACT(jsonPayload.${l})" }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 24
      growth_factor      = 2
      scale              = 0.01
    }
  }

  depends_on = [google_project_service.api]
}

resource "google_logging_metric" "gauges" {
  for_each    = local.gauges
  project     = var.project
  name        = "flexslurm_${each.key}"
  description = "${each.value} (logged by the reconciler once per pass; chart with ALIGN_MAX or ALIGN_MEAN)"
  filter      = "${local.function_logs} AND jsonPayload.gauge=\"${each.key}\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "1"
    labels {
      key        = "cluster"
      value_type = "STRING"
    }
    labels {
      key        = "pool"
      value_type = "STRING"
    }
    labels {
      key        = "state"
      value_type = "STRING"
    }
  }
  value_extractor = "EXTRACT(jsonPayload.value)"
  label_extractors = {
    cluster = "EXTRACT(jsonPayload.cluster)"
    pool    = "EXTRACT(jsonPayload.pool)"
    state   = "EXTRACT(jsonPayload.state)"
  }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 24
      growth_factor      = 2
      scale              = 1
    }
  }

  depends_on = [google_project_service.api]
}

resource "google_monitoring_dashboard" "flexslurm" {
  project        = var.project
  dashboard_json = templatefile("${path.module}/dashboard.json", { prefix = var.name_prefix })

  depends_on = [google_logging_metric.cluster_events, google_logging_metric.counters, google_logging_metric.samples, google_logging_metric.gauges]
}

# Dead letters: any message in a <topic>-dead-letter subscription is an event
# that kept failing (README "Dead letters").
resource "google_monitoring_alert_policy" "dead_letters" {
  project      = var.project
  display_name = "flexslurm: dead letters"
  combiner     = "OR"
  severity     = "ERROR"

  conditions {
    display_name = "a dead-letter subscription holds messages"
    condition_threshold {
      filter          = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=ends_with(\"-dead-letter\")"
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "60s"
      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_MAX"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["resource.label.subscription_id"]
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "flexslurm: messages in a dead-letter subscription"
    content   = "An event kept failing and was set aside. Read it with `gcloud pubsub subscriptions pull SUBSCRIPTION --limit=10` (no --auto-ack), fix the cause, republish it to its topic (deploy/README.md, \"Dead letters\"). `flexslurm status --dead-letter` counts them."
  }

  depends_on = [google_project_service.api]
}

# A static pool below its minimum for 15 minutes: capacity or quota keeps
# a static node from being replaced (the reconciler logs the shortfall once
# per pass, every few minutes).
resource "google_monitoring_alert_policy" "static_below_minimum" {
  project      = var.project
  display_name = "flexslurm: static pool below its minimum"
  combiner     = "OR"
  severity     = "WARNING"

  conditions {
    display_name = "static nodes missing for 15 minutes"
    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/flexslurm_static_shortfall\" AND resource.type=\"cloud_run_revision\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "900s"
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_PERCENTILE_99"
        cross_series_reducer = "REDUCE_MAX"
        group_by_fields      = ["metric.label.cluster", "metric.label.pool"]
      }
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "flexslurm: a static pool is below min_node_count"
    content   = "A pool's static nodes are not all running. See its events (`flexslurm events --cluster C --type STOCKOUT`, `--type QUOTA_EXCEEDED`, `--type POOL_BACKOFF`) and `flexslurm status`."
  }

  depends_on = [google_logging_metric.gauges]
}
