package membership

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

// newInstance returns an Instance of owner on c with the engine's test
// timings.
func newInstance(c redis.UniversalClient, owner string) *Instance {
	return New(Config{Client: c, Owner: owner, Incarnation: NewIncarnation(owner), LeaseTTL: time.Second,
		HeartbeatInterval: 150 * time.Millisecond, DiscoveryInterval: 50 * time.Millisecond})
}
