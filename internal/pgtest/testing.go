package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// New starts a cluster for one test and stops it in t.Cleanup. It skips
// the test only when no PostgreSQL binaries exist (CI installs them, see
// .ci/ensure-postgres); any other failure fails the test.
func New(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx)
	if errors.Is(err, ErrNoPostgres) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
