# The node pools' VMs: their own service account with least privilege, the
# munge key's secret, and the node settings `flexslurm apply --node-settings`
# reads (output node_settings). README.md lists every role and why.

locals {
  # The cluster id: the last segment of the spec's name, else display_name
  # (shared/spec).
  cluster_id = split("/", local.cluster.name)[5] != "" ? split("/", local.cluster.name)[5] : lookup(local.cluster, "display_name", "")

  # slurmd's configless --conf-server.
  conf_server = var.slurm_conf_server != "" ? var.slurm_conf_server : "${local.cluster_id}-controller"

  # The bucket of the flexslurm binary the nodes install, when one is given.
  binary_buckets = toset([for u in [var.node_binary_url] : split("/", u)[2] if u != ""])
}

# Runs on every node VM (the templates' service account, cloud-platform
# scope; IAM roles bound what it may do).
resource "google_service_account" "node" {
  project      = var.project
  account_id   = "${var.name_prefix}-node"
  display_name = "flexslurm node VMs"
  description  = "Identity of the node pools' VMs: hook events, the munge key, logs."
}

# Nodes: the hooks report job lifecycle and failed health checks.
resource "google_pubsub_topic_iam_member" "node_publisher" {
  for_each = toset(["job-pending", "health-failure"])
  project  = var.project
  topic    = google_pubsub_topic.topic[each.key].name
  role     = "roles/pubsub.publisher"
  member   = google_service_account.node.member
}

# Nodes: write their logs.
resource "google_project_iam_member" "node_logs" {
  project = var.project
  role    = "roles/logging.logWriter"
  member  = google_service_account.node.member
}

# The cluster's munge key. The operator adds the version (the key itself
# never passes through Terraform state):
#   gcloud secrets versions add CLUSTER-munge-key --data-file=munge.key
resource "google_secret_manager_secret" "munge_key" {
  project   = var.project
  secret_id = "${local.cluster_id}-munge-key"

  replication {
    auto {}
  }

  depends_on = [google_project_service.api]
}

# Nodes: read the munge key, and no other secret.
resource "google_secret_manager_secret_iam_member" "node_munge_key" {
  project   = var.project
  secret_id = google_secret_manager_secret.munge_key.secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.node.member
}

# Nodes: download the flexslurm binary, from its bucket only.
resource "google_storage_bucket_iam_member" "node_binary" {
  for_each = local.binary_buckets
  bucket   = each.key
  role     = "roles/storage.objectViewer"
  member   = google_service_account.node.member
}

# Functions: create templates (and through their MIGs, VMs) that carry the
# node account: actAs on that account only.
resource "google_service_account_iam_member" "function_node_user" {
  for_each           = local.identities
  service_account_id = google_service_account.node.name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.function[each.key].member
}
