package spec

import "reflect"

// extensionKey is the node pool field that holds flexslurm's extensions of
// the managed spec: settings the managed Slurm API has no field for. The
// managed API rejects the field; flexslurm's own API and `flexslurm apply`
// accept it (docs/extensions.md). Google's JSON mapping spells it the same in
// snake_case and lowerCamelCase.
const extensionKey = "flexslurm"

// PoolExtension is a node pool's "flexslurm" object: settings that change
// cost or placement, each opt-in. The zero value is a pool exactly as the
// managed spec describes it.
type PoolExtension struct {
	// Zones is the "zones" key (ext_zones.go): the zones of the cluster's
	// region a FLEX_START pool may take capacity in, the pool's zone among
	// them. Empty for a single-zone pool.
	Zones []string
	// CompactPlacement asks that every multi-node request of the pool be
	// placed close together (ext_placement.go); nil when not asked for.
	CompactPlacement *CompactPlacement
	// UseJobDuration: a resize request made for pending jobs asks Compute
	// for the jobs' time limit plus a boot allowance instead of the
	// pool's max run duration (ext_jobduration.go).
	UseJobDuration bool
}

// wirePoolExtension is the "flexslurm" object in the effective spec
// (effective.go): each setting that is set, in its input key.
type wirePoolExtension struct {
	Zones            []string              `json:"zones,omitempty"`
	CompactPlacement *wireCompactPlacement `json:"compact_placement,omitempty"`
	UseJobDuration   bool                  `json:"use_job_duration,omitempty"`
}

// wire is the extension's effective form: nil when nothing is set, so a
// pool without extensions has the effective spec it always had.
func (e PoolExtension) wire() *wirePoolExtension {
	w := wirePoolExtension{
		Zones:            e.Zones,
		CompactPlacement: e.CompactPlacement.wire(),
		UseJobDuration:   e.UseJobDuration,
	}
	if reflect.ValueOf(w).IsZero() {
		return nil
	}
	return &w
}

// poolExtension reads the pool's optional "flexslurm" object into p.Ext.
// Every key it does not know is reported at its path, like any other
// unknown field.
func (w *walker) poolExtension(o *object, p *NodePool) {
	v := o.get(extensionKey)
	if v == nil {
		return
	}
	eo := w.object(v, o.child(extensionKey),
		zonesKey,
		compactPlacementKey,
		keyUseJobDuration,
	)
	if eo == nil {
		return
	}
	w.extZones(eo, p)
	w.compactPlacement(eo, p)
	w.useJobDuration(eo, p)
}
