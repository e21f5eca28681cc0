package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seqby/seqby/internal/redistest"
)

// TestDemo runs the README's demo to completion, on the embedded Redis and
// on a private real redis-server.
func TestDemo(t *testing.T) {
	tests := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"embedded", func(*testing.T) string { return "" }},
		{"redis-server", func(t *testing.T) string { return "redis://" + redistest.New(t).Addr + "/0" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.url(t), &stdout, &stderr); code != 0 {
				t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "every client's events were applied in publish order") {
				t.Fatalf("demo output lacks its verdict:\n%s", stdout.String())
			}
		})
	}
}
