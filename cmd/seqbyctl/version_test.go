package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/seqby/seqby"
)

// -version prints the release in the source, seqby.Version, before or
// after a command (it printed the build's module version alone,
// "(devel)" for every build from a checkout, before issue #26).
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"halted", "-version"}, {"-version", "-json"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
			t.Fatalf("seqbyctl %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr.String())
		}
		got := strings.TrimSuffix(stdout.String(), "\n")
		want := "seqbyctl " + seqby.Version
		if got != want && !strings.HasPrefix(got, want+" (module ") {
			t.Errorf("seqbyctl %s printed %q, want %q, optionally followed by \" (module <version>)\"", strings.Join(args, " "), got, want)
		}
	}
}

// The build's module version is added only when it is known (not
// "(devel)", not a directory replace's made-up version) and says more
// than seqby.Version; under go tool seqbyctl's module is a dependency.
func TestVersionLine(t *testing.T) {
	dep := func(version string, replace *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{{Path: modulePath, Version: version, Replace: replace}}}
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "seqbyctl " + seqby.Version},
		{"go build in the checkout", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "seqbyctl " + seqby.Version},
		{"stamped pseudo-version", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.1.1-0.20261202000000-abcdef123456+dirty"}},
			"seqbyctl " + seqby.Version + " (module v0.1.1-0.20261202000000-abcdef123456+dirty)"},
		{"go tool, the release", dep(seqby.Version, nil), "seqbyctl " + seqby.Version},
		{"go tool, another version", dep("v9.9.9", nil), "seqbyctl " + seqby.Version + " (module v9.9.9)"},
		{"go tool, replaced by a directory", dep("v0.0.0", &debug.Module{Path: "../seqby"}), "seqbyctl " + seqby.Version},
	} {
		if got := versionLine(tc.bi); got != tc.want {
			t.Errorf("%s: versionLine = %q, want %q", tc.name, got, tc.want)
		}
	}
}
