package main

import (
	"os"
	"testing"

	"github.com/seqby/seqby/generator"
)

// TestGeneratedCodeIsCurrent fails when the committed seqby_gen.go files of
// this example differ from what seqgen writes now.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	res, err := generator.Generate(generator.Config{Dir: dir, Patterns: []string{"./..."}})
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Diff(dir); len(d) > 0 {
		t.Fatalf("generated code is stale; run go generate ./examples/orders/...\n%s", d)
	}
}
