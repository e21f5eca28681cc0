package redistest

import (
	"context"
	"strings"
	"testing"
)

func TestStartAnswersPing(t *testing.T) {
	s := New(t)
	if _, err := s.Do("PING"); err != nil {
		t.Fatalf("ping %s: %v", s.Addr, err)
	}
	if s.Addr == "127.0.0.1:6379" {
		t.Fatal("must never use the default port")
	}
}

func TestClusterComesUp(t *testing.T) {
	c := NewCluster(t, 3)
	if len(c.Addrs()) != 3 {
		t.Fatalf("addrs %v", c.Addrs())
	}
	info, err := c.Nodes[0].Do("CLUSTER", "INFO")
	if err != nil || !strings.Contains(info, "cluster_slots_assigned:16384") {
		t.Fatalf("cluster info %q, %v", info, err)
	}
}

// A moved slot takes its keys along: the new owner serves them, the old
// one redirects.
func TestClusterMoveSlot(t *testing.T) {
	c := NewCluster(t, 3)
	owner := -1
	for i, n := range c.Nodes {
		if _, err := n.Do("SET", "k", "v"); err == nil {
			owner = i
		}
	}
	to := (owner + 1) % len(c.Nodes)
	from, err := c.MoveSlot(context.Background(), "k", to)
	if err != nil || from != owner {
		t.Fatalf("MoveSlot: from %d, %v; want from %d", from, err, owner)
	}
	if v, err := c.Nodes[to].Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET k on the new owner: %q, %v", v, err)
	}
	if _, err := c.Nodes[owner].Do("GET", "k"); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
		t.Fatalf("GET k on the old owner: %v, want MOVED", err)
	}
}
