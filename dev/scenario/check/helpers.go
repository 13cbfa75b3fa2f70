package check

import (
	"maps"
	"slices"

	"github.com/flexslurm/flexslurm/shared/naming"
)

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// sortStrings returns a sorted copy.
func sortStrings(xs []string) []string { return slices.Sorted(slices.Values(xs)) }

// orAny is "*" for an empty selector.
func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// NamesNode reports whether a list of VM names has a VM of the node.
func NamesNode(vms []string, node string) bool {
	for _, vm := range vms {
		if n, _, _, _, ok := naming.ParseVMName(vm); ok && n == node {
			return true
		}
	}
	return false
}
