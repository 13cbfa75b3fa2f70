// Package version is the flexslurm binary's own version: the module
// version, the commit and the build date it was built from.
//
// `make release` sets Version, Commit and Date with the linker
// (-ldflags "-X github.com/flexslurm/flexslurm/shared/version.Version=…");
// a plain `go build` leaves them empty and Get takes what the Go toolchain
// recorded in the binary instead (runtime/debug.ReadBuildInfo: the main
// module's version, and the vcs.revision, vcs.time and vcs.modified
// settings of a build inside a Git checkout,
// https://pkg.go.dev/runtime/debug#BuildInfo).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (`make release`); empty in a plain `go build`.
var (
	// Version is the module version, e.g. "v1.4.0" or `git describe`'s
	// "v1.4.0-3-gabcdef0-dirty".
	Version string
	// Commit is the full Git commit hash.
	Commit string
	// Date is the build time, RFC 3339 in UTC.
	Date string
)

// Unknown stands for a field the binary does not record.
const Unknown = "unknown"

// Info is what a binary knows of its own build.
type Info struct {
	// Version is the module version ("(devel)" or Unknown when neither the
	// linker nor the toolchain recorded one).
	Version string
	// Commit is the Git commit, with "-dirty" when the work tree had
	// uncommitted changes (Unknown outside a Git checkout).
	Commit string
	// Date is the build date; a plain `go build` records none, and Date is
	// then the commit's time followed by " (commit time)" (Unknown when
	// neither is known).
	Date string
	// Go is the toolchain and platform, e.g. "go1.26.8 linux/amd64".
	Go string
}

// Get returns this binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(bi, Version, Commit, Date)
}

func get(bi *debug.BuildInfo, version, commit, date string) Info {
	in := Info{Version: version, Commit: commit, Date: date, Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	var revision, vcsTime string
	modified := false
	if bi != nil {
		if in.Version == "" {
			in.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			in.Go = bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if in.Commit == "" && revision != "" {
		in.Commit = revision
		if modified {
			in.Commit += "-dirty"
		}
	}
	if in.Date == "" && vcsTime != "" {
		in.Date = vcsTime + " (commit time)"
	}
	for _, f := range []*string{&in.Version, &in.Commit, &in.Date} {
		if *f == "" {
			*f = Unknown
		}
	}
	return in
}

// String is the one line `flexslurm version` prints.
func (in Info) String() string {
	return fmt.Sprintf("flexslurm %s (commit %s, built %s, %s)", in.Version, in.Commit, in.Date, in.Go)
}

// Known reports whether ID identifies a build: a module version other than
// "(devel)", or a commit. Test binaries and builds outside a Git checkout
// have neither.
func (in Info) Known() bool { return in.ID() != "" }

// ID is what two builds are compared by: the module version, with the
// commit when the version does not already name it; "" when neither is
// known. A release's `git describe` version and a plain build's
// pseudo-version both name their commit.
func (in Info) ID() string {
	v := in.Version
	if v == "(devel)" || v == Unknown {
		v = ""
	}
	c := in.Commit
	if c == Unknown {
		c = ""
	}
	switch {
	case v == "" && c == "":
		return ""
	case v == "":
		return c
	case c == "" || strings.Contains(v, abbrev(c)):
		return v
	}
	return v + "+" + shortCommit(c)
}

// abbrev is a commit's first 7 hex digits, Git's shortest abbreviation
// (`git describe` names the commit so).
func abbrev(c string) string {
	if len(c) > 7 {
		return c[:7]
	}
	return c
}

// shortCommit is the first 12 hex digits of a commit (a pseudo-version's
// length), with the "-dirty" mark kept.
func shortCommit(c string) string {
	h, dirty := strings.CutSuffix(c, "-dirty")
	if len(h) > 12 {
		h = h[:12]
	}
	if dirty {
		return h + "-dirty"
	}
	return h
}
