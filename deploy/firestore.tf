# flexslurm's state (shared/store, layout in its Firestore type's doc).

resource "google_firestore_database" "state" {
  project                     = var.project
  name                        = var.firestore_database
  location_id                 = local.firestore_location
  type                        = "FIRESTORE_NATIVE"
  app_engine_integration_mode = "DISABLED"
  delete_protection_state     = "DELETE_PROTECTION_ENABLED"
  deletion_policy             = "ABANDON"

  depends_on = [google_project_service.api]
}

# The processed-event ledger (clusters/{c}/events/{id}) carries expire_at =
# applied_at + 7 days: Firestore deletes expired markers itself. A TTL field
# needs no index.
resource "google_firestore_field" "events_ttl" {
  project    = var.project
  database   = google_firestore_database.state.name
  collection = "events"
  field      = "expire_at"

  ttl_config {}
  index_config {}
}

# The stored cluster spec is never queried: no index for it.
resource "google_firestore_field" "cluster_spec" {
  project    = var.project
  database   = google_firestore_database.state.name
  collection = "clusters"
  field      = "spec"

  index_config {}
}

# A pool's instance template body (a few KB of JSON, kept so the template
# can be created long after the spec was applied) is never queried either.
resource "google_firestore_field" "pool_template_body" {
  project    = var.project
  database   = google_firestore_database.state.name
  collection = "pools"
  field      = "template_body"

  index_config {}
}

# Cluster events (cluster_events/{id}, shared/store) carry expire_at = the
# event's time + 30 days.
resource "google_firestore_field" "cluster_events_ttl" {
  project    = var.project
  database   = google_firestore_database.state.name
  collection = "cluster_events"
  field      = "expire_at"

  ttl_config {}
  index_config {}
}
