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
  description = "The node settings flexslurm apply reads (terraform output -json node_settings > node_settings.json; shared/nodeconfig Settings); the API function gets the same (FLEXSLURM_NODE_SETTINGS)."
  value       = local.node_settings
}

output "apply_command" {
  description = "Publishes the cluster spec once the functions run."
  value       = "flexslurm apply --api ${google_cloudfunctions2_function.api.service_config[0].uri} ${var.cluster_spec_file}  # cluster ${local.cluster_id}, through the API function (the invoker role is needed: var.api_invokers)"
}

output "api_url" {
  description = "URL of the API function (the modelDevelopmentClusters REST surface; callers need roles/run.invoker, var.api_invokers): flexslurm apply --api, or $FLEXSLURM_API_URL; its status page is at /."
  value       = google_cloudfunctions2_function.api.service_config[0].uri
}
