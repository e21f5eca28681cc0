package guarantee

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// The suite runs on a standalone redis-server by default, and on a
// three-master Redis Cluster with SEQBY_TOPOLOGY=cluster (make test runs
// both). Engine children inherit the variable and the node addresses.
const envTopology = "SEQBY_TOPOLOGY"

func onCluster() bool { return os.Getenv(envTopology) == "cluster" }

// startRedis starts the test's private Redis and returns its address, or
// the cluster nodes' addresses joined by commas.
func startRedis(t *testing.T) string {
	t.Helper()
	if onCluster() {
		return strings.Join(redistest.NewCluster(t, 3).Addrs(), ",")
	}
	return redistest.New(t).Addr
}

// newClient connects to what startRedis returned.
func newClient(addr string) redis.UniversalClient {
	if onCluster() {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addr, ","), ContextTimeoutEnabled: true})
	}
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

// keys lists the keys matching pattern on every node.
func keys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var out []string
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			ks, err := m.Keys(ctx, pattern).Result()
			mu.Lock()
			out = append(out, ks...)
			mu.Unlock()
			return err
		})
		return out, err
	}
	return c.Keys(ctx, pattern).Result()
}
