# What `flexslurm probe` observed on this project (docs/probe.md). It writes
# compute-probe.auto.tfvars.json beside this file: resize_request_api, which
# the functions read, and this map, kept for the record only. flexslurm
# survives every outcome recorded here (docs/compute-contract.md, "Open
# points"), so nothing reads it.
variable "compute_probe" {
  description = "Observations of flexslurm probe (run, project, zone, time, and one verdict per open point). Informative: nothing reads them."
  type        = map(string)
  default     = {}
}
