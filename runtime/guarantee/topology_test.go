package guarantee

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
)

// The suite runs on a standalone redis-server by default, on a
// three-master Redis Cluster with SEQBY_TOPOLOGY=cluster, and on a primary
// with two replicas watched by three sentinels with SEQBY_TOPOLOGY=sentinel
// (make test runs all three). Engine children inherit the variable and the
// address.
const envTopology = "SEQBY_TOPOLOGY"

func onCluster() bool  { return os.Getenv(envTopology) == "cluster" }
func onSentinel() bool { return os.Getenv(envTopology) == "sentinel" }

// startRedis starts the test's private Redis and returns its address: the
// cluster nodes' addresses joined by commas, or a Sentinel URL.
func startRedis(t *testing.T) string {
	t.Helper()
	switch {
	case onCluster():
		return strings.Join(redistest.NewCluster(t, 3).Addrs(), ",")
	case onSentinel():
		_, url := startSentinel(t)
		return url
	}
	return redistest.New(t).Addr
}

// startSentinel starts a primary, two replicas and three sentinels for the
// test and returns them with the Sentinel URL runtime.Connect takes.
func startSentinel(t *testing.T) (*redistest.Sentinel, string) {
	t.Helper()
	s := redistest.NewSentinel(t, 2, 3)
	return s, sentinelURL(s)
}

// sentinelURL is go-redis's failover URL for s: the first sentinel as the
// host, the others as addr parameters.
func sentinelURL(s *redistest.Sentinel) string {
	addrs := s.SentinelAddrs()
	url := "redis://" + addrs[0] + "/0?master_name=" + s.Name
	for _, a := range addrs[1:] {
		url += "&addr=" + a
	}
	return url
}

// newClient connects to what startRedis returned; a Sentinel URL goes
// through runtime.Connect, as a user's would.
func newClient(addr string) redis.UniversalClient {
	switch {
	case onCluster():
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addr, ","), ContextTimeoutEnabled: true})
	case strings.HasPrefix(addr, "redis://"):
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := runtime.Connect(ctx, addr)
		if err != nil {
			panic(fmt.Sprintf("connect to the sentinels: %v", err))
		}
		return c
	}
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

// newClientFrom is newClient dialing from source
// (redistest.SourceDialer), so that a partition can cut it off; only a
// Sentinel URL takes a source, and "" is newClient.
func newClientFrom(addr, source string) redis.UniversalClient {
	if source == "" {
		return newClient(addr)
	}
	opts, err := redis.ParseFailoverURL(addr)
	if err != nil {
		panic(fmt.Sprintf("a client from %s needs a Sentinel URL: %v", source, err))
	}
	opts.ContextTimeoutEnabled = true
	opts.Dialer = redistest.SourceDialer(source)
	return redis.NewFailoverClient(opts)
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
