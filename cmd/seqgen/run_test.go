package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seqby/seqby"
)

// TestExitCodes pins the exit statuses docs/markers.md promises for flags and
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
