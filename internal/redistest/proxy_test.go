package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// client is a go-redis client of addr dialing from source ("" for the
// default), with no retries, so a cut shows as an error at once.
func client(t *testing.T, addr, source string) *redis.Client {
	t.Helper()
	opts := &redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second}
	if source != "" {
		opts.Dialer = SourceDialer(source)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// A proxy cuts exactly the clients named, their open connections and new
// ones, and lets them back at Heal.
func TestProxyCutsBySource(t *testing.T) {
	if err := CanPartition(); err != nil {
		t.Skip(err)
	}
	s := New(t)
	p, err := StartProxy(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx := context.Background()
	cut, other := client(t, p.Addr, Partitioned), client(t, p.Addr, "")
	reach := func(c *redis.Client) bool {
		// Two tries: the first may meet a pooled connection the cut closed.
		return c.Ping(ctx).Err() == nil || c.Ping(ctx).Err() == nil
	}
	for _, tc := range []struct {
		name       string
		apply      func()
		cut, other bool // reachable
	}{
		{"open", func() {}, true, true},
		{"Cut", func() { p.Cut(Partitioned) }, false, true},
		{"Heal", p.Heal, true, true},
		{"Only", func() { p.Only(Partitioned) }, true, false},
		{"Heal again", p.Heal, true, true},
	} {
		tc.apply()
		if got := reach(cut); got != tc.cut {
			t.Errorf("%s: the client from %s reaches the server: %v, want %v", tc.name, Partitioned, got, tc.cut)
		}
		if got := reach(other); got != tc.other {
			t.Errorf("%s: the other client reaches the server: %v, want %v", tc.name, got, tc.other)
		}
	}
}

// IsolatePrimary splits a proxied topology: the sentinels promote a
// replica while the isolated primary goes on taking its side's writes,
// which Heal discards when the sentinels make it a replica.
func TestSentinelIsolatePrimary(t *testing.T) {
	s := NewSentinelProxied(t, 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	first, err := s.PrimaryAddr()
	if err != nil || first != s.AddrOf(s.Nodes[0]) || first == s.Nodes[0].Addr {
		t.Fatalf("primary %q, %v; want the proxy %s", first, err, s.AddrOf(s.Nodes[0]))
	}
	minority := client(t, first, Partitioned)
	if err := minority.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Both replicas must hold k before the split: the sentinels promote
	// either, going by offsets they read up to 10 s ago. WAIT answers how
	// many acked, which a loaded machine can leave short of 2 at its
	// timeout, so ask again rather than split with one replica behind.
	for acked := ""; acked != "2"; {
		if ctx.Err() != nil {
			t.Fatalf("WAIT 2: %s replicas hold k", acked)
		}
		if acked, err = s.Nodes[0].Do("WAIT", "2", "1000"); err != nil {
			t.Fatal(err)
		}
	}
	isolated, second, err := s.IsolatePrimary(ctx, Partitioned)
	if err != nil || isolated != s.Nodes[0] || second == first {
		t.Fatalf("IsolatePrimary: isolated %v, new primary %q, %v", isolated.Addr, second, err)
	}
	// The minority side still writes to its primary and reaches nothing else.
	if err := minority.Set(ctx, "k", "during", 0).Err(); err != nil {
		t.Fatalf("SET on the isolated primary from its side: %v", err)
	}
	if err := client(t, second, Partitioned).Ping(ctx).Err(); err == nil {
		t.Fatal("the minority side reaches the new primary")
	}
	if err := client(t, s.SentinelAddrs()[0], Partitioned).Ping(ctx).Err(); err == nil {
		t.Fatal("the minority side reaches a sentinel")
	}
	if err := client(t, first, "").Ping(ctx).Err(); err == nil {
		t.Fatal("the majority side reaches the isolated primary")
	}
	if v, err := client(t, second, "").Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Fatalf("GET k on the new primary: %q, %v; want before", v, err)
	}
	if err := s.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := isolated.Do("INFO", "replication"); err != nil || !strings.Contains(info, "role:slave") {
		t.Fatalf("the healed server's role: %v\n%s", err, info)
	}
	if v, err := isolated.Do("GET", "k"); err != nil || v != "before" {
		t.Fatalf("GET k on the healed server: %q, %v; want before (its side's write discarded)", v, err)
	}
}
