# Topics, dead-letter topics and the subscriptions flexslurm owns. The
# functions' own subscriptions are created by Eventarc with their triggers
# (functions.tf); dead-letters.sh gives them their dead-letter policy.

resource "google_pubsub_topic" "topic" {
  for_each = local.topics
  project  = var.project
  name     = each.key

  depends_on = [google_project_service.api]
}

# "<topic>-dead-letter" receives what a subscription of <topic> could not
# deliver after var.max_delivery_attempts attempts.
resource "google_pubsub_topic" "dead_letter" {
  for_each = local.dead_lettered
  project  = var.project
  name     = "${each.key}-dead-letter"

  depends_on = [google_project_service.api]
}

# A topic without subscriptions drops what it receives: each dead-letter
# topic has a pull subscription of the same name that keeps its messages
# seven days for operators (`flexslurm status --dead-letter` counts them).
resource "google_pubsub_subscription" "dead_letter" {
  for_each                   = local.dead_lettered
  project                    = var.project
  name                       = "${each.key}-dead-letter"
  topic                      = google_pubsub_topic.dead_letter[each.key].id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"

  expiration_policy {
    ttl = ""
  }
}

# The Pub/Sub service agent forwards undeliverable messages: it must be able
# to publish to every dead-letter topic.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  for_each = local.dead_lettered
  project  = var.project
  topic    = google_pubsub_topic.dead_letter[each.key].name
  role     = "roles/pubsub.publisher"
  member   = local.pubsub_agent
}

# The Slurm agent pulls its commands (drain, resume, requeue) from here.
resource "google_pubsub_subscription" "slurm_commands" {
  project                    = var.project
  name                       = "slurm-commands-agent"
  topic                      = google_pubsub_topic.topic["slurm-commands"].id
  ack_deadline_seconds       = 60
  message_retention_duration = "86400s"

  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter["slurm-commands"].id
    max_delivery_attempts = var.max_delivery_attempts
  }

  depends_on = [google_pubsub_topic_iam_member.dead_letter_publisher]
}

# ... and acknowledge on the source subscription what it forwarded.
resource "google_pubsub_subscription_iam_member" "slurm_commands_dead_letter" {
  project      = var.project
  subscription = google_pubsub_subscription.slurm_commands.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}
