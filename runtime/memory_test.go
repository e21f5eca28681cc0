package runtime

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// Run refuses a Redis that may evict seqby's keys, on a single server and
// when one master of a cluster may; AllowEviction turns the refusal into a
// warning; a server that will not show its configuration is logged as
// unchecked, and the engine runs.
func TestMemoryPolicyCheck(t *testing.T) {
	evicting := redistest.New(t)
	if _, err := evicting.Do("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	cl := redistest.NewCluster(t, 3)
	if _, err := cl.Nodes[1].Do("CONFIG", "SET", "maxmemory-policy", "volatile-lru"); err != nil {
		t.Fatal(err)
	}
	hidden := redistest.New(t)
	if _, err := hidden.Do("ACL", "SETUSER", "noconfig", "on", ">pw", "+@all", "-config", "~*"); err != nil {
		t.Fatal(err)
	}
	single := func(s *redistest.Server, user string) redis.UniversalClient {
		o := &redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true}
		if user != "" {
			o.Username, o.Password = user, "pw"
		}
		return redis.NewClient(o)
	}
	tests := []struct {
		name    string
		client  func() redis.UniversalClient
		allow   bool
		refused bool
		log     string // a warning the engine must log
	}{
		{"allkeys-lru", func() redis.UniversalClient { return single(evicting, "") }, false, true, ""},
		{"allkeys-lru allowed", func() redis.UniversalClient { return single(evicting, "") }, true, false, "may evict"},
		{"one cluster master volatile-lru", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
		}, false, true, ""},
		{"config hidden", func() redis.UniversalClient { return single(hidden, "noconfig") }, false, false, "could not check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.client()
			defer c.Close()
			var logs syncBuffer
			opts := fastOptions("m1")
			opts.AllowEviction = tt.allow
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			e, err := NewEngine(c, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Register(keyedHandler("orders", func(context.Context, *testEvent) error { return nil })); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			if tt.refused {
				select {
				case err := <-done:
					if !errors.Is(err, ErrEvictionPolicy) {
						t.Fatalf("Run: %v, want ErrEvictionPolicy", err)
					}
				case <-ctx.Done():
					t.Fatal("Run did not refuse to start")
				}
				return
			}
			eventually(t, 10*time.Second, "the engine running", func() bool { return e.Status().Running })
			eventually(t, 10*time.Second, "the warning logged", func() bool { return strings.Contains(logs.String(), tt.log) })
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// SkipEvictionCheck is for a server known to have no CONFIG (the embedded
// Redis of tests and demos): Run neither checks the policy nor warns that
// it could not. Without it, the same server still gets today's warning, a
// managed service's reminder. By the time the engine is consuming, the
// check has run (it precedes everything else in Run), so the logs then say
// whether it warned.
func TestSkipEvictionCheck(t *testing.T) {
	embedded := miniredis.RunT(t)
	evicting := redistest.New(t)
	if _, err := evicting.Do("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		addr  string
		skip  bool
		warns bool // a maxmemory-policy line in the logs
	}{
		{"embedded, checked", embedded.Addr(), false, true},
		{"embedded, skipped", embedded.Addr(), true, false},
		{"evicting server, skipped", evicting.Addr, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: tt.addr, ContextTimeoutEnabled: true})
			defer c.Close()
			var logs syncBuffer
			opts := fastOptions("s1")
			opts.SkipEvictionCheck = tt.skip
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			r := startEngine(t, c, opts, keyedHandler("orders", func(context.Context, *testEvent) error { return nil }))
			eventually(t, 10*time.Second, "the engine consuming", func() bool { return r.Status().Consuming })
			r.stop()
			if got := strings.Contains(logs.String(), "maxmemory-policy"); got != tt.warns {
				t.Fatalf("a maxmemory-policy line logged: %v, want %v; logs:\n%s", got, tt.warns, logs.String())
			}
		})
	}
}
