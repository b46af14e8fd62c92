package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	rev := "1a2b3c4d5e6f7a8b9c0d"
	tests := []struct {
		name     string
		main     string
		settings map[string]string
		want     string
	}{
		{"nothing recorded", "", nil, "dev"},
		// A build without VCS stamping (-buildvcs=false, a tree without
		// .git, as in a container build) knows no version: it says so
		// rather than printing the toolchain's placeholder.
		{"devel without revision", "(devel)", nil, "dev"},
		{"tagged module", "v1.2.3", nil, "v1.2.3"},
		{"local build with revision", "(devel)", map[string]string{"vcs.revision": rev}, "(devel) rev 1a2b3c4d5e6f"},
		{"dirty tree", "(devel)", map[string]string{"vcs.revision": rev, "vcs.modified": "true"}, "(devel) rev 1a2b3c4d5e6f+dirty"},
		{"pseudo-version names its revision", "v0.0.0-20261124000000-1a2b3c4d5e6f", map[string]string{"vcs.revision": rev}, "v0.0.0-20261124000000-1a2b3c4d5e6f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := &debug.BuildInfo{Main: debug.Module{Version: tt.main}}
			for k, v := range tt.settings {
				info.Settings = append(info.Settings, debug.BuildSetting{Key: k, Value: v})
			}
			if got := fromBuildInfo(info); got != tt.want {
				t.Errorf("fromBuildInfo = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLinkTimeVersionWins(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v9.9.9"
	if got := Version(); got != "v9.9.9" {
		t.Fatalf("Version = %q, want the -ldflags value", got)
	}
}
