package version

import (
	"runtime/debug"
	"testing"

	"github.com/seqby/seqby"
)

// TestLine: the build's module version is added only when it is known
// (not "(devel)", not a directory replace's made-up version) and says more
// than seqby.Version, whether the tools' module is the main one or a
// dependency (go tool in a user's module).
func TestLine(t *testing.T) {
	const mod = modulePath
	rel := "seqgen " + seqby.Version
	dep := func(version string, replace *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "github.com/other/mod", Version: "v9.9.9"}, {Path: mod, Version: version, Replace: replace}}}
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, rel},
		{"go test or go run", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "(devel)"}}, rel},
		{"go build in a checkout, no VCS stamp", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: ""}}, rel},
		{"go build in a dirty checkout", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.1.1-0.20261202025500-df560c8abcde+dirty"}},
			rel + " (module v0.1.1-0.20261202025500-df560c8abcde+dirty)"},
		{"main module, released", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: seqby.Version}}, rel},
		{"main module replaced by a local checkout", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.0.0",
			Replace: &debug.Module{Path: "../seqby", Version: "(devel)"}}}, rel},
		{"main module replaced by a fork's version", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.0.0",
			Replace: &debug.Module{Path: "github.com/fork/seqby", Version: "v0.1.2"}}}, rel + " (module v0.1.2)"},
		{"another main module, seqby not a dependency", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v1.2.3"}}, rel},
		{"go tool, released", dep(seqby.Version, nil), rel},
		{"go tool, a later commit", dep("v0.1.1-0.20261203000000-0123456789ab", nil), rel + " (module v0.1.1-0.20261203000000-0123456789ab)"},
		{"go tool, replaced by a local checkout", dep("v0.0.0", &debug.Module{Path: "../seqby"}), rel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Line("seqgen", tt.bi); got != tt.want {
				t.Errorf("Line = %q, want %q", got, tt.want)
			}
		})
	}
}
