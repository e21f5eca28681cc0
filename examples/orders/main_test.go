package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seqby/seqby/internal/redistest"
)

// TestDemo runs the README's demo to completion, on the embedded Redis, on
// a private real redis-server and on a private three-master cluster (the
// URL names one node).
func TestDemo(t *testing.T) {
	tests := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"embedded", func(*testing.T) string { return "" }},
		{"redis-server", func(t *testing.T) string { return "redis://" + redistest.New(t).Addr + "/0" }},
		{"cluster", func(t *testing.T) string { return "redis://" + redistest.NewCluster(t, 3).Nodes[0].Addr }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.url(t), &stdout, &stderr); code != 0 {
				t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			for _, verdict := range []string{
				"every client's events were applied in publish order",
				"every order was placed and paid: ready to ship",
			} {
				if !strings.Contains(stdout.String(), verdict) {
					t.Fatalf("demo output lacks %q:\n%s", verdict, stdout.String())
				}
			}
		})
	}
}
