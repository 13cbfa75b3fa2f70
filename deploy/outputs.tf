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

output "apply_command" {
  description = "Publishes the cluster spec once the functions run."
  value       = "flexslurm apply --project ${var.project} ${var.cluster_spec_file}  # cluster ${local.cluster.name}"
}
