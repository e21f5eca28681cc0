package redistest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/poll"
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

// NewClusterReplicas starts a cluster of masters primaries with replicas
// replicas each (StartClusterReplicas) for the test and stops it in
// t.Cleanup: for tests that fail a primary over (Failover, KillPrimary,
// Rejoin).
func NewClusterReplicas(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := StartClusterReplicas(ctx, masters, replicas, Config{})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Topologies runs f twice, as the subtests "standalone" (a single server)
// and "cluster" (three masters), each with a client of its own
// (ContextTimeoutEnabled) closed at cleanup: for behaviour that must hold
// on both.
func Topologies(t *testing.T, f func(t *testing.T, c redis.UniversalClient)) {
	t.Run("standalone", func(t *testing.T) {
		s := New(t)
		c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		f(t, c)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := NewCluster(t, 3)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		f(t, c)
	})
}

// TopologiesLosing is Topologies with clients whose connections lose the
// replies of the calls armed on l (LostReply.Dialer), one LostReply per
// topology: for calls that must have the same outcome when Redis runs
// them twice.
func TopologiesLosing(t *testing.T, f func(t *testing.T, c redis.UniversalClient, l *LostReply)) {
	t.Run("standalone", func(t *testing.T) {
		s := New(t)
		var l LostReply
		c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, Dialer: l.Dialer(nil)})
		t.Cleanup(func() { c.Close() })
		f(t, c, &l)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := NewCluster(t, 3)
		var l LostReply
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, Dialer: l.Dialer(nil)})
		t.Cleanup(func() { c.Close() })
		f(t, c, &l)
	})
}

// NewSentinel starts a primary with replicas watched by sentinels for the
// test (StartSentinel) and stops them in t.Cleanup.
func NewSentinel(t testing.TB, replicas, sentinels int) *Sentinel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := StartSentinel(ctx, replicas, sentinels, Config{})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewSentinelProxied is NewSentinel with every server behind a proxy
// (StartSentinelProxied), so the test can partition the network. It
// skips the test where the platform cannot (CanPartition).
func NewSentinelProxied(t testing.TB, replicas, sentinels int) *Sentinel {
	t.Helper()
	if err := CanPartition(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := StartSentinelProxied(ctx, replicas, sentinels, Config{})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Paused stops s (SIGSTOP) for the test and returns resume, which
// continues it (SIGCONT) and fails the test if it cannot; resume is also
// run at cleanup, so a test that fails while s is stopped leaves nothing
// stopped. Calling resume again does nothing.
func Paused(t testing.TB, s *Server) (resume func()) {
	t.Helper()
	if err := s.Pause(); err != nil {
		t.Fatalf("redistest: pause %s: %v", s.Addr, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := s.Resume(); err != nil {
				t.Errorf("redistest: resume %s: %v", s.Addr, err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

// NewReplicated starts a primary with replicas replicas (no sentinels),
// DEBUG allowed, for the test, and returns it with a client of the
// primary once every replica is in sync; both end in t.Cleanup. For tests
// of the strict replication mode, which WAITs for replicas.
func NewReplicated(t testing.TB, replicas int) (*Sentinel, *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := StartSentinel(ctx, replicas, 0, Config{Args: []string{"--enable-debug-command", "local"}})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Close)
	c := redis.NewClient(&redis.Options{Addr: s.Nodes[0].Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	poll.Until(t, 20*time.Second, "the replicas in sync", func() bool {
		info, err := c.Info(context.Background(), "replication").Result()
		return err == nil && strings.Count(info, "state=online") == replicas
	})
	return s, c
}

// Client is a cluster client of c (ContextTimeoutEnabled), closed in
// t.Cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// KeysOnTwoShards returns two partition keys, "a" and another, whose
// streams ("order:{key}") two different primaries of c serve.
func (c *Cluster) KeysOnTwoShards(t testing.TB) (string, string) {
	t.Helper()
	a, err := c.PrimaryOf("order:{a}")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		k := fmt.Sprintf("b%d", i)
		b, err := c.PrimaryOf("order:{" + k + "}")
		if err != nil {
			t.Fatal(err)
		}
		if b != a {
			return "a", k
		}
	}
	t.Fatal("redistest: no key on another primary than a's")
	return "", ""
}

// NewClient starts a private redis-server for the test (New) and returns
// a client of it (ContextTimeoutEnabled); both end in t.Cleanup.
func NewClient(t testing.TB) *redis.Client {
	t.Helper()
	s := New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// Context is a context for a test's Redis calls: it ends after a minute,
// so a call that hangs fails the test rather than the whole run, and at
// t.Cleanup.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
