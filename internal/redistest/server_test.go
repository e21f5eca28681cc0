package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
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

// A sentinel topology fails over both ways: asked (SENTINEL FAILOVER)
// and on a killed primary, which rejoins as a replica when restarted;
// writes acknowledged by the primary and replicated (WAIT) survive.
func TestSentinelFailsOver(t *testing.T) {
	s := NewSentinel(t, 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	first, err := s.PrimaryAddr()
	if err != nil || first != s.Nodes[0].Addr {
		t.Fatalf("primary %q, %v; want %s", first, err, s.Nodes[0].Addr)
	}
	if _, err := s.Nodes[0].Do("SET", "k", "1"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Nodes[0].Do("WAIT", "2", "5000"); err != nil || n != "2" {
		t.Fatalf("WAIT 2: %q, %v", n, err)
	}
	second, err := s.Failover(ctx)
	if err != nil || second == first {
		t.Fatalf("Failover: %q, %v", second, err)
	}
	// The write survives on the primary the sentinels name. Polled, with
	// every server's state on failure: once in CI, GET k right after
	// Failover answered nil on the server it returned, and 8 runs alone
	// did not show it again (cause not found; a server that is emptying
	// its dataset for a resync answers so for a moment). A write really
	// lost never comes back, and fails here after a minute.
	if err := s.wait(ctx, "k on the primary the sentinels name", func() (bool, error) {
		p, err := s.PrimaryAddr()
		if err != nil || s.Node(p) == nil {
			return false, nil
		}
		v, err := s.Node(p).Do("GET", "k")
		return err == nil && v == "1", nil
	}); err != nil {
		var state []string
		for _, n := range s.Nodes {
			info, err := n.Do("INFO", "replication")
			v, gerr := n.Do("GET", "k")
			state = append(state, fmt.Sprintf("%s: GET k %q %v; %v %s", n.Addr, v, gerr, err, strings.ReplaceAll(info, "\n", " ")))
		}
		t.Fatalf("%v (Failover returned %s):\n%s", err, second, strings.Join(state, "\n"))
	}
	second, _ = s.PrimaryAddr()
	killed, third, err := s.KillPrimary(ctx)
	if err != nil || third == second || killed.Addr != second {
		t.Fatalf("KillPrimary: killed %s, new primary %q, %v", killed.Addr, third, err)
	}
	if err := killed.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.wait(ctx, "the old primary to rejoin as a replica", func() (bool, error) {
		info, err := killed.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up"), nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, a := range append([]string{first, second, third}, s.SentinelAddrs()...) {
		if strings.HasSuffix(a, ":6379") || strings.HasSuffix(a, ":26379") {
			t.Fatalf("%s: must never use a default port", a)
		}
	}
}
