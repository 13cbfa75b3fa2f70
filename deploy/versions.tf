terraform {
  # 1.9: variable validations may read files; strcontains needs 1.5.
  required_version = ">= 1.9"

  required_providers {
    google = {
      source = "hashicorp/google"
      # universe_domain, google_cloudfunctions2_function with
      # build_config.service_account, google_firestore_field TTL.
      version = ">= 6.0"
    }
    archive = {
      source = "hashicorp/archive"
      # excludes with glob (doublestar) patterns.
      version = ">= 2.4"
    }
  }

  # State in a Cloud Storage bucket, configured at init:
  #   terraform init -backend-config=bucket=BUCKET -backend-config=prefix=flexslurm
  # (or `terraform init -backend=false` to validate without state).
  backend "gcs" {}
}

provider "google" {
  project         = var.project
  region          = var.region
  universe_domain = var.universe_domain
}
