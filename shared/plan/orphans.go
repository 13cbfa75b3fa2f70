package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// deleteOrphans deletes VMs of the pool (by label) that no node record names,
// once older than the orphan grace.
func (b *builder) deleteOrphans(pool *model.Pool, po ObservedPool, vms vmIndex, pol Policy) {
	deleting := map[string]bool{}
	for _, a := range b.out {
		switch d := a.(type) {
		case DeleteVMs:
			for _, name := range d.VMs {
				deleting[name] = true
			}
		case DeleteMIG:
			for _, name := range d.VMs {
				deleting[name] = true
			}
		}
	}
	// A node names only VMs of its own name (model.VMName: <node>-g<k>),
	// so the one record that could name a VM is found from the VM's name.
	named := func(vm string) bool {
		vm = naming.BaseVMName(vm)
		i := strings.LastIndex(vm, "-g")
		if i <= 0 {
			return false
		}
		n, ok := b.st.Nodes[vm[:i]]
		return ok && n.VMName == vm
	}
	// Most of the pool's VMs are named by the pool's own records, which
	// the pass has just read: those are marked from the records first
	// (b.st.Nodes is keyed by node name, so the record a VM's name points
	// to is the one found here), and only the others are looked up in the
	// map of every record.
	byRecord := make([]bool, len(po.VMs))
	for _, n := range b.poolNodes(pool.ID) {
		i, ok := vms.at[n.VMName]
		if !ok || n.VMName == "" {
			continue
		}
		if j := strings.LastIndex(n.VMName, "-g"); j > 0 && n.VMName[:j] == n.Name {
			byRecord[i] = true
		}
	}
	var names []string
	for i, vm := range po.VMs {
		if byRecord[i] || named(vm.Name) || deleting[vm.Name] || deleting[naming.BaseVMName(vm.Name)] {
			continue
		}
		if vm.Status == "STOPPING" || incompleteVM(vm) || b.now.Sub(vm.Created) < pol.OrphanGrace {
			continue
		}
		if b.orphanRunsJob(vm) { // started.go
			continue
		}
		names = append(names, vm.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		vm, _ := vms.get(name)
		b.orphanVM(pool, po, vm, fmt.Sprintf("reconciler: VM %s is labelled as pool %s's but no node record names it (orphan older than %s)", name, pool.ID, pol.OrphanGrace))
	}
}

// orphansPass deletes the cluster's VMs that no record claims.
type orphansPass struct{}

func (orphansPass) apply(b *builder, pc *poolContext) {
	b.deleteOrphans(pc.pool, pc.observed, pc.vms, pc.pol)
}
