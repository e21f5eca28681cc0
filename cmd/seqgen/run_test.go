package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/seqby/seqby"
)

// TestExitCodes pins the exit statuses the README promises for flags and
// load failures (the testscripts cover 0 and 1 on real modules).
func TestExitCodes(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		stdout     string
		stderr     string
		quietOut   bool
		quietError bool
	}{
		{args: []string{"-h"}, code: 0, stdout: "usage: seqgen", quietError: true},
		{args: []string{"-version"}, code: 0, stdout: "seqgen ", quietError: true},
		{args: []string{"-nope"}, code: 2, stderr: "flag provided but not defined", quietOut: true},
		{args: []string{"./testdata-does-not-exist/..."}, code: 2, stderr: "cannot load packages", quietOut: true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stdout %q, stderr %q; want them to contain %q and %q", stdout.String(), stderr.String(), tt.stdout, tt.stderr)
			}
			if tt.quietOut && stdout.Len() > 0 {
				t.Errorf("stdout should be empty, got %q", stdout.String())
			}
			if tt.quietError && stderr.Len() > 0 {
				t.Errorf("stderr should be empty, got %q", stderr.String())
			}
		})
	}
}

// TestVersion: -version prints the release in the source, seqby.Version,
// first, whatever the build info says (a test binary's is "(devel)").
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, want 0; stderr: %s", code, stderr.String())
	}
	want := "seqgen " + seqby.Version
	if got := strings.TrimSuffix(stdout.String(), "\n"); got != want && !strings.HasPrefix(got, want+" (module ") {
		t.Errorf("-version printed %q, want %q, optionally followed by \" (module <version>)\"", got, want)
	}
}

// TestVersionLine: the build's module version is added only when it is
// known (not "(devel)", not a directory replace's made-up version) and
// says more than seqby.Version.
func TestVersionLine(t *testing.T) {
	const mod = "github.com/seqby/seqby"
	rel := "seqgen " + seqby.Version
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
		{"go tool, released", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: seqby.Version}}, rel},
		{"go tool, replaced by a local checkout", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.0.0",
			Replace: &debug.Module{Path: "../seqby", Version: "(devel)"}}}, rel},
		{"go tool, replaced by a local checkout, no replace version", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.0.0",
			Replace: &debug.Module{Path: "../seqby"}}}, rel},
		{"another main module", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v1.2.3"}}, rel},
		{"a dependency, released", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: mod, Version: seqby.Version}}}, rel},
		{"a dependency, a later commit", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: "github.com/other/mod", Version: "v9.9.9"}, {Path: mod, Version: "v0.1.1-0.20261203000000-0123456789ab"}}},
			rel + " (module v0.1.1-0.20261203000000-0123456789ab)"},
		{"a dependency replaced by a local checkout", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: mod, Version: "v0.0.0", Replace: &debug.Module{Path: "../seqby"}}}}, rel},
		{"go tool, replaced by a fork's version", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.0.0",
			Replace: &debug.Module{Path: "github.com/fork/seqby", Version: "v0.1.2"}}}, rel + " (module v0.1.2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(tt.bi); got != tt.want {
				t.Errorf("versionLine = %q, want %q", got, tt.want)
			}
		})
	}
}
