package rdb

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// newRedis starts a private redis-server for the test and returns a client.
func newRedis(t *testing.T) *redis.Client {
	t.Helper()
	s := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the deadline passes: tests wait
// on state, never on sleeps.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// trimCategory trims stream for the groups registered for category, as the
// engine does.
func trimCategory(ctx context.Context, c redis.UniversalClient, category, stream string) (int64, error) {
	groups, err := Groups(ctx, c, category)
	if err != nil {
		return 0, err
	}
	return Trim(ctx, c, groups, stream)
}
