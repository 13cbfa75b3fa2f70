package spec

// keyUseJobDuration is the pool extension key that sizes each job's
// capacity by the job: "use_job_duration": true (docs/extensions.md).
//
// Cluster Toolkit's Slurm nodesets have the same switch, dws_flex's
// use_job_duration: the job's TimeLimit becomes the VM's run duration
// (https://github.com/GoogleCloudPlatform/cluster-toolkit/blob/main/docs/slurm-dws-flex.md).
// flexslurm adds the boot allowance to it and keeps it within Compute's
// 600–604800 s and the pool's flex_start_max_duration (shared/plan,
// RequestRunDuration).
const keyUseJobDuration = "use_job_duration"

// useJobDuration reads the pool's "use_job_duration". It is a Flex-Start
// setting: only a FLEX_START VM has a run duration (scheduling.maxRunDuration,
// a resize request's requestedRunDuration), so any other pool is refused
// with the provisioning model it has.
func (w *walker) useJobDuration(eo *object, p *NodePool) {
	v := eo.get(keyUseJobDuration)
	if v == nil {
		return
	}
	path := eo.child(keyUseJobDuration)
	on, ok := w.boolean(v, path)
	if !ok || !on {
		return
	}
	if p.ProvisioningModel != "" && !p.IsFlexStart() {
		w.add(v.pos, path, "is only allowed when provisioning_model is FLEX_START, not %s: only a Flex-Start VM has a run duration", p.ProvisioningModel)
		return
	}
	p.Ext.UseJobDuration = p.IsFlexStart()
}
