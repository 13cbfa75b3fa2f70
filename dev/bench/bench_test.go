package bench

import (
	"strings"
	"testing"
)

func TestWithFlexPoolsAndZones(t *testing.T) {
	for _, tc := range []struct{ pools, max, zones int }{{10, 20, 1}, {100, 100, 26}} {
		c, err := WithFlexPools(exampleSpec(t), tc.pools, tc.max)
		if err != nil {
			t.Fatal(err)
		}
		c, err = WithZones(c, tc.zones)
		if err != nil {
			t.Fatal(err)
		}
		flex := c.FlexPools()
		if len(flex) != tc.pools || len(c.Slurm.Partitions) != tc.pools {
			t.Fatalf("%d flex pools, %d partitions, want %d", len(flex), len(c.Slurm.Partitions), tc.pools)
		}
		zones := map[string]bool{}
		for i, p := range flex {
			if p.ID != PoolID(i, tc.pools) || p.MinNodeCount != 0 || p.MaxNodeCount != tc.max {
				t.Errorf("pool %d: %s min %d max %d", i, p.ID, p.MinNodeCount, p.MaxNodeCount)
			}
			if got := c.PartitionsForPool(p.ID); len(got) != 1 || got[0] != p.ID {
				t.Errorf("pool %s is in partitions %v, want its own", p.ID, got)
			}
			zones[p.Zone] = true
		}
		if len(zones) != tc.zones {
			t.Errorf("pools over %d zones, want %d", len(zones), tc.zones)
		}
		if _, ok := c.Pool("login"); !ok {
			t.Error("the login pool was dropped")
		}
	}
	if _, err := WithZones(exampleSpec(t), 27); err == nil {
		t.Error("27 zones accepted")
	}
}

func TestCalls(t *testing.T) {
	a := Calls{"ListMIGs": 3, "CreateResizeRequest": 1}
	d := a.Sub(Calls{"ListMIGs": 1, "CreateResizeRequest": 1})
	if d.String() != "ListMIGs×2" || d.Sum(Lists...) != 2 || d.Sum(Mutations...) != 0 {
		t.Errorf("Sub = %v", d)
	}
	if (Calls{}).String() != "none" {
		t.Error("empty calls should print none")
	}
}

func TestTableMarkdown(t *testing.T) {
	var tab Table
	late := tab.Section(2, "late", "a")
	late.Add("x|y")
	early := tab.Section(1, "early", "a", "b")
	early.Add("1", "2")
	early.Note("note %d", 7)
	early.Target("t1", "v", "≤ 1", false)
	late.Pending("t2", "pending: x", "p")
	got := tab.Markdown()
	for _, want := range []string{"### early\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nnote 7\n", "| x\\|y |", "| t1 | v | ≤ 1 | **MISSED** |\n| t2 | pending: x | p | pending |"} {
		if !strings.Contains(got, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "### early") > strings.Index(got, "### late") {
		t.Errorf("sections not ordered by rank:\n%s", got)
	}
}
