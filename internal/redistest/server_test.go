package redistest

import (
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
