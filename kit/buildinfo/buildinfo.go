// Package buildinfo reports the version of the running binary: the value
// set at link time (-ldflags "-X github.com/idnhq/idn/kit/buildinfo.version=v1.2.3"),
// else the module version and VCS revision recorded by the Go toolchain.
// A build with neither (VCS stamping off, or no .git in the tree) says
// "dev", never the toolchain's "(devel)" placeholder: release builds set
// the version at link time (the Dockerfile takes it from VERSION, else
// from git describe).
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// version is set with -ldflags -X; empty means "read the build info".
var version string

// Version returns the binary's version, e.g. "v0.3.0", "v0.3.1-0.20261124…"
// or "(devel) rev 1a2b3c4d5e6f+dirty"; "dev" when nothing is recorded.
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return fromBuildInfo(info)
}

func fromBuildInfo(info *debug.BuildInfo) string {
	v := info.Main.Version
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" || strings.Contains(v, rev[:min(12, len(rev))]) {
		// A module version such as v0.0.0-20261124-1a2b3c4d5e6f already
		// names its revision; "(devel)" without one names nothing.
		if v == "" || v == "(devel)" {
			return "dev"
		}
		return v
	}
	if v == "" {
		v = "(devel)"
	}
	v += " rev " + rev[:min(12, len(rev))]
	if dirty {
		v += "+dirty"
	}
	return v
}
