output "functions" {
  description = "Deployed function names, by deployment key."
  value       = { for k, f in google_cloudfunctions2_function.fn : k => f.name }
}

output "eventarc_dead_letters" {
  description = "For dead-letters.sh, one line per function trigger: TRIGGER DEAD_LETTER_TOPIC MAX_DELIVERY_ATTEMPTS PUBSUB_SERVICE_AGENT."
  value = join("\n", [
    for k, f in google_cloudfunctions2_function.fn :
    "${f.event_trigger[0].trigger} ${google_pubsub_topic.dead_letter[local.functions[k].topic].id} ${var.max_delivery_attempts} ${local.pubsub_agent}"
  ])
}

output "slurm_service_account" {
  description = "Service account of the Slurm hooks and agent."
  value       = google_service_account.slurm.email
}

output "slurm_commands_subscription" {
  description = "Subscription the Slurm agent pulls its commands from."
  value       = google_pubsub_subscription.slurm_commands.name
}

output "node_service_account" {
  description = "Service account of the node VMs."
  value       = google_service_account.node.email
}

output "node_settings" {
  description = "The node settings flexslurm apply reads (terraform output -json node_settings > node_settings.json; shared/nodeconfig Settings)."
  value = {
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

output "apply_command" {
  description = "Publishes the cluster spec once the functions run."
  value       = "terraform output -json node_settings > node_settings.json && flexslurm apply --project ${var.project} --node-settings node_settings.json ${var.cluster_spec_file}  # cluster ${local.cluster_id}"
}
