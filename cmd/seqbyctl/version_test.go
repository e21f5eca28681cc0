package main

import (
	"bytes"
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
