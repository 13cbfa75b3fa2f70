package model

import (
	"slices"
	"strings"
)

// Multi-zone pools (docs/design/zones.md): a pool whose spec names several zones
// of its region has its resize requests made in regional MIGs
// (distributionPolicy ANY_SINGLE_ZONE over Zones); each VM is in the one
// zone Compute placed its request in.

// MultiZone reports whether new requests of the pool go to regional MIGs.
func (p *Pool) MultiZone() bool { return len(p.Zones) >= 2 }

// MIGLocation is where the pool's new request MIGs are made: its region
// for a multi-zone pool, else its zone.
func (p *Pool) MIGLocation() string {
	if p.MultiZone() {
		return p.Region
	}
	return p.Zone
}

// VMZones are the zones the pool's VMs may be in: its zones, or its zone.
func (p *Pool) VMZones() []string {
	if p.MultiZone() {
		return p.Zones
	}
	return []string{p.Zone}
}

// HasZone reports whether zone is one the pool's VMs may be in: its zone
// or one of its zones. A pool that was multi-zone and is single-zone now
// (Region set, no Zones) accepts every zone of its region, where VMs of
// its earlier regional MIGs may still run. (A multi-zone pool whose zone
// list changed does not accept the zones it dropped: events about VMs
// there are refused, and the reconciler, which lists the zones it names,
// finds such VMs gone.)
func (p *Pool) HasZone(zone string) bool {
	if zone == p.Zone || slices.Contains(p.Zones, zone) {
		return true
	}
	return p.Region != "" && !p.MultiZone() && RegionOfZone(zone) == p.Region
}

// RegionOfZone is a zone's region ("us-central1-a" → "us-central1").
func RegionOfZone(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return ""
}
