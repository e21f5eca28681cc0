package redistest

import (
	"context"
	"testing"
	"time"
)

// New starts a server for one test and kills it in t.Cleanup. It fails the
// test (it does not skip) when redis-server is missing: the guarantees are
// only tested against real Redis.
func New(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// NewCluster starts a cluster of masters for the test and stops it in
// t.Cleanup.
func NewCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, masters, Config{})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
