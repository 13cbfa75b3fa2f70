variable "project" {
  description = "Project id flexslurm is deployed into (S3NS ids carry the s3ns: prefix)."
  type        = string
}

variable "region" {
  description = "Region of the functions, the source bucket, the Artifact Registry repository and the Cloud Scheduler job."
  type        = string
}

variable "universe_domain" {
  description = "Universe domain of the Google Cloud APIs: googleapis.com, or e.g. s3nsapis.fr for S3NS. Also handed to the functions as GOOGLE_CLOUD_UNIVERSE_DOMAIN."
  type        = string
  default     = "googleapis.com"

  validation {
    condition     = can(regex("^[a-z0-9-]+(\\.[a-z0-9-]+)+$", var.universe_domain))
    error_message = "The universe domain is a DNS domain such as googleapis.com or s3nsapis.fr."
  }
}

variable "service_agent_domain" {
  description = "Domain of the per-service agents (service-NUMBER@gcp-sa-pubsub.DOMAIN): iam.gserviceaccount.com on Google Cloud, s3ns-system.iam.gserviceaccount.com in S3NS."
  type        = string
  default     = "iam.gserviceaccount.com"
}

variable "cluster_spec_file" {
  description = "Path of the cluster_config.json that `flexslurm apply` publishes after the deployment (its id names the scheduler job's message attribute and appears in the outputs)."
  type        = string

  validation {
    condition     = can(jsondecode(file(var.cluster_spec_file)).name)
    error_message = "The cluster spec file must be readable JSON with a name (run `flexslurm validate FILE`)."
  }
}

variable "reconcile_schedule" {
  description = "Cron schedule of the Cloud Scheduler job that publishes reconcile ticks."
  type        = string
  default     = "*/5 * * * *"
}

variable "scheduler_time_zone" {
  description = "Time zone of reconcile_schedule."
  type        = string
  default     = "Etc/UTC"
}

variable "name_prefix" {
  description = "Prefix of every named resource (functions, service accounts, bucket, sink, job)."
  type        = string
  default     = "flexslurm"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,10}$", var.name_prefix))
    error_message = "2-11 characters: lowercase letters, digits and hyphens, starting with a letter (service account ids are at most 30 characters)."
  }
}

variable "firestore_database" {
  description = "Firestore database id; (default) is the project's default database."
  type        = string
  default     = "(default)"
}

variable "firestore_location" {
  description = "Firestore location (a region such as europe-west1, or a multi-region such as eur3); empty means var.region."
  type        = string
  default     = ""
}

variable "max_delivery_attempts" {
  description = "Deliveries of a message before Pub/Sub moves it to its dead-letter topic (5-100). Pushes are retried with exponential backoff from 10 s to 600 s, so 15 attempts span about an hour and a half."
  type        = number
  default     = 15

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub accepts 5 to 100 delivery attempts."
  }
}

variable "function_memory" {
  description = "Memory of each function instance."
  type        = string
  default     = "512Mi"
}

variable "function_timeout_seconds" {
  description = "Time allowed to one invocation (at most 540 s for event-driven functions)."
  type        = number
  default     = 300
}

variable "function_max_instances" {
  description = "Most instances of one function; a few suffice, since every decision is a Firestore transaction."
  type        = number
  default     = 5
}

variable "end_warning" {
  description = "FLEXSLURM_END_WARNING of the functions: how long before a node's VM ends at its run duration the batch scripts of its running jobs receive end_signal (a Go duration, 1m to 24h; \"0\" sends none). Make it longer than the reconcile period plus a checkpoint's time (docs/user.md)."
  type        = string
  default     = "0"

  validation {
    condition     = can(regex("^(0|[0-9]+(h|m|s|h[0-9]+m|m[0-9]+s|h[0-9]+m[0-9]+s))$", var.end_warning))
    error_message = "end_warning must be 0 or a Go duration such as 15m or 1h30m."
  }
}

variable "end_signal" {
  description = "FLEXSLURM_END_SIGNAL of the functions: the signal sent before a node's end, USR1 (default, as sbatch --signal's), USR2, TERM, INT, HUP or URG."
  type        = string
  default     = "USR1"

  validation {
    condition     = contains(["USR1", "USR2", "TERM", "INT", "HUP", "URG"], var.end_signal)
    error_message = "end_signal must be USR1, USR2, TERM, INT, HUP or URG."
  }
}

variable "repair_node_limit" {
  description = "FLEXSLURM_REPAIR_NODE_LIMIT of the functions: a node repaired this many times within repair_node_window is left drained for an operator on its next health failure (docs/design/repair-limit.md). An integer 1 to 100, \"none\" for no limit, or \"\" for flexslurm's default (3)."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^(|none|[1-9]|[1-9][0-9]|100)$", var.repair_node_limit))
    error_message = "repair_node_limit must be an integer from 1 to 100, none, or empty for the default."
  }
}

variable "repair_node_window" {
  description = "FLEXSLURM_REPAIR_NODE_WINDOW of the functions: the window, from a node's first repair, in which its repairs count toward repair_node_limit. A Go duration in hours from 1h to 720h (e.g. 24h, 48h), or \"\" for flexslurm's default (24h)."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^(|[1-9]h|[1-9][0-9]h|[1-6][0-9][0-9]h|7[01][0-9]h|720h)$", var.repair_node_window))
    error_message = "repair_node_window must be a whole number of hours from 1h to 720h (e.g. 48h), or empty for the default."
  }
}

variable "log_level" {
  description = "FLEXSLURM_LOG_LEVEL of the functions: DEBUG, INFO, WARN or ERROR."
  type        = string
  default     = "INFO"
}

variable "node_image" {
  description = "Default boot image of the node pools (a pool's node_image overrides it): an image family, resolved to its latest image by `flexslurm apply`, or an image. The default is Cluster Toolkit's slurm-gcp Ubuntu 22.04 image with the NVIDIA 570 driver."
  type        = string
  default     = "projects/schedmd-slurm-public/global/images/family/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570"

  validation {
    condition     = can(regex("^projects/[a-z0-9:.-]+/global/images/(family/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.node_image))
    error_message = "An image projects/P/global/images/NAME or an image family projects/P/global/images/family/FAMILY."
  }
}

variable "home_nfs_source" {
  description = "NFS export the nodes mount as /home: the home_directory_storage Filestore instance's IP address and file share, HOST:/SHARE (gcloud filestore instances describe NAME --zone ZONE). Needed by flexslurm apply, which refuses node settings without it."
  type        = string
  default     = ""

  validation {
    condition     = var.home_nfs_source == "" || can(regex("^[^:/]+:/.*$", var.home_nfs_source))
    error_message = "HOST:/SHARE, e.g. 10.0.0.2:/home."
  }
}

variable "slurm_conf_server" {
  description = "slurmd's configless --conf-server, host[:port] of slurmctld; empty means CLUSTER-controller."
  type        = string
  default     = ""
}

variable "controller_instance" {
  description = "The Slurm controller VM, zones/ZONE/instances/NAME (in var.project): the functions accept job and node power reports only with its instance identity token (docs/security.md)."
  type        = string

  validation {
    condition     = can(regex("^zones/[a-z]+(-[a-z0-9]+)+/instances/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.controller_instance))
    error_message = "zones/ZONE/instances/NAME, e.g. zones/us-central1-a/instances/mycluster-controller."
  }

  validation {
    condition     = !can(regex("/instances/[a-z][a-z0-9]*-[-a-z0-9]+-[0-9]+-g[0-9]+$", var.controller_instance))
    error_message = "The controller VM must not be named as a node VM (CLUSTER-POOL-INDEX-gGENERATION): the functions refuse its reports, since a node VM of that name could sign them."
  }
}

variable "node_binary_url" {
  description = "gs://BUCKET/OBJECT of the flexslurm binary, for node images that lack /usr/local/sbin/flexslurm; empty when the image carries it. The node account may read that bucket."
  type        = string
  default     = ""

  validation {
    condition     = var.node_binary_url == "" || can(regex("^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]/[A-Za-z0-9._/+=-]+$", var.node_binary_url))
    error_message = "Empty, or gs://BUCKET/OBJECT."
  }
}

variable "flexslurm_version" {
  description = "The flexslurm version the functions are built as (`make release`'s VERSION, e.g. `git describe --tags --always --dirty`), set with the Go buildpack's GOOGLE_GOLDFLAGS (https://cloud.google.com/docs/buildpacks/go). The functions record it in every instance template; a node whose binary is of another version warns (deploy/README.md, \"Versions\"). Empty: none is recorded and nodes compare nothing."
  type        = string
  default     = ""

  validation {
    condition     = var.flexslurm_version == "" || can(regex("^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$", var.flexslurm_version))
    error_message = "Empty, or a version of letters, digits, '.', '_', '+' and '-' (at most 128 characters)."
  }
}

variable "resize_request_api" {
  description = "FLEXSLURM_RESIZE_REQUEST_API of the functions: the Compute API version of the resize-request calls. \"auto\" (v1 first; beta for requests that name their VMs once v1 refuses one; resizeBy for one-VM requests once beta refuses too), \"v1\", \"beta\", or \"count\" (no VM names: every node through a request of its own, for projects where neither v1 nor beta accepts them). Naming a resize request's VMs is Preview in Google's documentation; `flexslurm probe` tells which your project needs (docs/compute-contract.md, \"Open points\")."
  type        = string
  default     = "auto"

  validation {
    condition     = contains(["v1", "beta", "auto", "count"], var.resize_request_api)
    error_message = "resize_request_api must be v1, beta, auto or count."
  }
}

variable "api_invokers" {
  description = "Members (user:…, group:…, serviceAccount:…) granted roles/run.invoker on the API function: who may create, change, delete and repair clusters through it. Never allUsers or allAuthenticatedUsers."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.api_invokers : !contains(["allUsers", "allAuthenticatedUsers"], m) && length(regexall("^(user|group|serviceAccount|domain|principal|principalSet):", m)) > 0])
    error_message = "api_invokers: each member is user:, group:, serviceAccount:, domain:, principal: or principalSet: …; allUsers and allAuthenticatedUsers would open the API to anyone."
  }
}
