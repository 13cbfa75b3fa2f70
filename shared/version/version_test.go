package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestGetFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/flexslurm/flexslurm", Version: "v0.0.0-20261207063544-499703f69b7a+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "499703f69b7a0123456789abcdef0123456789ab"}, {Key: "vcs.time", Value: "2026-12-07T06:35:44Z"}, {Key: "vcs.modified", Value: "true"}}}
	in := get(bi, "", "", "")
	if in.Version != bi.Main.Version || in.Commit != "499703f69b7a0123456789abcdef0123456789ab-dirty" || in.Date != "2026-12-07T06:35:44Z (commit time)" {
		t.Errorf("get = %+v", in)
	}
	if got, want := in.ID(), bi.Main.Version; got != want {
		t.Errorf("ID() = %q, want %q (the pseudo-version names the commit)", got, want)
	}
	s := in.String()
	for _, w := range []string{"flexslurm v0.0.0-20261207063544-499703f69b7a+dirty", "commit 499703f69b7a", "built 2026-12-07T06:35:44Z", "go1.26.8"} {
		if !strings.Contains(s, w) {
			t.Errorf("String() = %q, want %q in it", s, w)
		}
	}
}

func TestLinkerValuesWin(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "aaaaaaaaaaaa"}}}
	in := get(bi, "v1.4.0", "abcdef0123456789", "2026-12-07T08:00:00Z")
	if in.Version != "v1.4.0" || in.Commit != "abcdef0123456789" || in.Date != "2026-12-07T08:00:00Z" {
		t.Errorf("get = %+v", in)
	}
	if got, want := in.ID(), "v1.4.0+abcdef012345"; got != want {
		t.Errorf("ID() = %q, want %q", got, want)
	}
	in = get(bi, "v1.4.0-3-gabcdef0-dirty", "abcdef0123456789-dirty", "")
	if got, want := in.ID(), "v1.4.0-3-gabcdef0-dirty"; got != want {
		t.Errorf("ID() = %q, want %q (git describe names the commit)", got, want)
	}
}

func TestUnknownBuild(t *testing.T) {
	for _, bi := range []*debug.BuildInfo{nil, {Main: debug.Module{Version: "(devel)"}}} {
		in := get(bi, "", "", "")
		if in.Known() || in.Commit != Unknown || in.Date != Unknown {
			t.Errorf("get(%v) = %+v, Known %v: want an unknown build", bi, in, in.Known())
		}
	}
	if in := get(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "", "", ""); in.ID() != "abc" {
		t.Errorf("a devel build with a commit: ID() = %q, want the commit", in.ID())
	}
}
