package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/seqby/seqby/internal/pgtest"
	"github.com/seqby/seqby/internal/redistest"
)

// TestMain lets the test binary be the demo's engine A child process.
func TestMain(m *testing.M) {
	if name := os.Getenv(engineEnv); name != "" {
		os.Exit(childMain(name, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestDemo runs the README's demo to completion, on the embedded Redis, on
// a private real redis-server, on a private three-master cluster (the URL
// names one node) and on a primary with two replicas and three sentinels
// (a Sentinel URL), and checks the story's facts: the takeover
// happened, nothing was lost or reordered, the halt was resolved, the
// replayed event was applied, the pm saw every order, the outbox drained (on SQLite, and on PostgreSQL with
// DATABASE_URL); with -metrics-addr, the metrics were served.
func TestDemo(t *testing.T) {
	tests := []struct {
		name string
		url  func(t *testing.T) string
		args []string
		db   func(t *testing.T) string // DATABASE_URL; nil: the SQLite default
	}{
		{"embedded", func(*testing.T) string { return "" }, []string{"-metrics-addr", "127.0.0.1:0"}, nil},
		{"redis-server", func(t *testing.T) string { return "redis://" + redistest.New(t).Addr + "/0" }, nil, nil},
		{"cluster", func(t *testing.T) string { return "redis://" + redistest.NewCluster(t, 3).Nodes[0].Addr }, nil, nil},
		{"sentinel", func(t *testing.T) string {
			s := redistest.NewSentinel(t, 2, 3)
			a := s.SentinelAddrs()
			return "redis://" + a[0] + "/0?master_name=" + s.Name + "&addr=" + a[1] + "&addr=" + a[2]
		}, nil, nil},
		{"postgres-outbox", func(t *testing.T) string { return "redis://" + redistest.New(t).Addr + "/0" }, nil,
			func(t *testing.T) string { return pgtest.New(t).DSN }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", "")
			if tt.db != nil {
				t.Setenv("DATABASE_URL", tt.db(t))
			}
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, tt.url(t), &stdout, &stderr); code != 0 {
				t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			want := []string{verdictTakeover, verdictOrder, verdictHalt, verdictReplay, verdictPM, verdictOutbox}
			if tt.args != nil {
				want = append(want, `seqby_events_total{`, `seqby_outcome="failed"`, `seqby_partitions_halted{`)
			}
			for _, line := range want {
				if !strings.Contains(stdout.String(), line) {
					t.Errorf("demo output lacks %q:\n%s", line, stdout.String())
				}
			}
			// Neither engine warns that it cannot check the embedded
			// Redis's maxmemory-policy (it has no CONFIG), and a real
			// one is noeviction.
			if strings.Contains(stderr.String(), "maxmemory-policy") {
				t.Errorf("the demo warns about maxmemory-policy:\n%s", stderr.String())
			}
			if testing.Verbose() {
				t.Log("\n" + stdout.String())
			}
		})
	}
}

// REDIS_URL unset runs the demo on its embedded Redis; set, it names the
// Redis; set to nothing (REDIS_URL=$UNSET), it is refused with a message
// that says what to do, rather than quietly taken for unset.
func TestRedisURL(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr error
	}{
		{"unset", nil, "", nil},
		{"set", map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/0"}, "redis://127.0.0.1:6379/0", nil},
		{"set with spaces", map[string]string{"REDIS_URL": " redis://127.0.0.1:6379 "}, "redis://127.0.0.1:6379", nil},
		{"empty", map[string]string{"REDIS_URL": ""}, "", errEmptyRedisURL},
		{"blank", map[string]string{"REDIS_URL": "  "}, "", errEmptyRedisURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := redisURL(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Fatalf("redisURL: %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "redis://host:port") {
				t.Fatalf("%v: does not say what to set", err)
			}
		})
	}
}
