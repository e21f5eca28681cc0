package redistest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A cluster with a replica a primary fails over both ways, asked
// (Failover: the old primary becomes a replica) and on a killed primary
// (KillPrimary, then Rejoin brings it back as a replica): the key's slot
// gets a new primary with a new replication id, a cluster client goes on
// reading and writing the key, and every primary ends with its replica.
// MoveSlot still works once failovers have shuffled the roles.
func TestClusterReplicasFailover(t *testing.T) {
	const key = "k"
	c := NewClusterReplicas(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 3 primaries and 3 replicas", len(c.Nodes))
	}
	everyPrimaryHasItsReplica(t, c)

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	if err := cc.Set(ctx, key, "0", 0).Err(); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name string
		// failover fails over the primary of key's slot and returns the
		// primary it replaced and the new one.
		failover func(ctx context.Context) (old, primary *Server, err error)
	}{
		{"asked", func(ctx context.Context) (*Server, *Server, error) {
			old, err := c.PrimaryOf(key)
			if err != nil {
				return nil, nil, err
			}
			primary, err := c.Failover(ctx, key)
			return old, primary, err
		}},
		{"forced", func(ctx context.Context) (*Server, *Server, error) {
			old, err := c.PrimaryOf(key)
			if err != nil {
				return nil, nil, err
			}
			primary, err := c.FailoverForce(ctx, key)
			return old, primary, err
		}},
		{"killed and rejoined", func(ctx context.Context) (*Server, *Server, error) {
			killed, primary, err := c.KillPrimary(ctx, key)
			if err != nil {
				return killed, primary, err
			}
			return killed, primary, c.Rejoin(ctx, killed)
		}},
	}
	for i, step := range steps {
		ok := t.Run(step.name, func(t *testing.T) {
			before, err := c.PrimaryOf(key)
			if err != nil {
				t.Fatal(err)
			}
			replid := info(t, before, "master_replid")
			// Every write reached the replica, so a kill loses none.
			awaitReplicated(ctx, t, c, before)

			old, primary, err := step.failover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if old != before || primary == nil || primary == before {
				t.Fatalf("failed over %v to %v; want from %s to another node", old, primary, before.Addr)
			}
			if now, err := c.PrimaryOf(key); err != nil || now != primary {
				t.Fatalf("PrimaryOf after the failover: %v, %v; want %s", now, err, primary.Addr)
			}
			if r := info(t, primary, "role"); r != "master" {
				t.Fatalf("new primary %s: role:%s", primary.Addr, r)
			}
			// A promoted replica starts a new replication history, keeping
			// the old one as its second id (so the old primary's other
			// replicas can go on partially).
			if id := info(t, primary, "master_replid"); id == replid {
				t.Fatalf("new primary %s kept the replication id %s", primary.Addr, id)
			}
			if id2 := info(t, primary, "master_replid2"); id2 != replid {
				t.Fatalf("new primary %s: master_replid2 %s, want the old id %s", primary.Addr, id2, replid)
			}
			// The old primary follows the new one.
			if r, err := c.ReplicaOf(primary); err != nil || r != old {
				t.Fatalf("ReplicaOf(new primary): %v, %v; want the old primary %s", r, err, old.Addr)
			}
			// The client finds the new primary (after MOVED, or a refused
			// dial, it reloads the slots) and the write made before.
			want := strconv.Itoa(i)
			if v := clientGet(ctx, t, cc, key); v != want {
				t.Fatalf("GET %s through the client: %q, want %q", key, v, want)
			}
			if err := cc.Set(ctx, key, strconv.Itoa(i+1), 0).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := primary.Do("GET", key); err != nil || v != strconv.Itoa(i+1) {
				t.Fatalf("GET %s on the new primary: %q, %v", key, v, err)
			}
			everyPrimaryHasItsReplica(t, c)
		})
		if !ok {
			return
		}
	}

	t.Run("move slot", func(t *testing.T) {
		from, err := c.PrimaryOf(key)
		if err != nil {
			t.Fatal(err)
		}
		primaries, err := c.Primaries()
		if err != nil {
			t.Fatal(err)
		}
		to := -1
		for i, n := range c.Nodes {
			for _, p := range primaries {
				if n == p && p != from && to < 0 {
					to = i
				}
			}
		}
		if _, err := c.MoveSlot(ctx, key, to); err != nil {
			t.Fatal(err)
		}
		if now, err := c.PrimaryOf(key); err != nil || now != c.Nodes[to] {
			t.Fatalf("PrimaryOf after MoveSlot: %v, %v; want %s", now, err, c.Nodes[to].Addr)
		}
		if v := clientGet(ctx, t, cc, key); v != strconv.Itoa(len(steps)) {
			t.Fatalf("GET %s through the client after MoveSlot: %q", key, v)
		}
	})
}

// Asked or not, a failover needs a replica to promote: without one, both
// fail at once and nothing is killed.
func TestClusterFailoverWithoutReplica(t *testing.T) {
	c := NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Failover(ctx, "k"); err == nil {
		t.Fatal("Failover on a cluster without replicas did not fail")
	}
	killed, _, err := c.KillPrimary(ctx, "k")
	if err == nil || killed != nil {
		t.Fatalf("KillPrimary on a cluster without replicas: killed %v, %v", killed, err)
	}
	for _, n := range c.Nodes {
		if !n.running() {
			t.Fatalf("%s was killed", n.Addr)
		}
	}
}

// everyPrimaryHasItsReplica checks that 3 primaries serve the slots, each
// with connected_slaves:1.
func everyPrimaryHasItsReplica(t *testing.T, c *Cluster) {
	t.Helper()
	primaries, err := c.Primaries()
	if err != nil || len(primaries) != 3 {
		t.Fatalf("primaries %v, %v; want 3", primaries, err)
	}
	for _, p := range primaries {
		if n := info(t, p, "connected_slaves"); n != "1" {
			t.Fatalf("primary %s: connected_slaves:%s", p.Addr, n)
		}
	}
}

// awaitReplicated waits until p's replica has processed every write p
// took so far.
func awaitReplicated(ctx context.Context, t *testing.T, c *Cluster, p *Server) {
	t.Helper()
	r, err := c.ReplicaOf(p)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.ParseInt(info(t, p, "master_repl_offset"), 10, 64)
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, _ := strconv.ParseInt(info(t, r, "master_repl_offset"), 10, 64)
		if got >= want {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("replica %s at offset %d, primary %s at %d", r.Addr, got, p.Addr, want)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
}

// clientGet reads key through cc, retrying errors for up to 30 s: a
// client that knew the old primary reloads the slot map only once a
// command failed on it.
func clientGet(ctx context.Context, t *testing.T, cc *redis.ClusterClient, key string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		v, err := cc.Get(ctx, key).Result()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("GET %s through the client: %v", key, err)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
}

// info is one field of s's INFO replication.
func info(t *testing.T, s *Server, field string) string {
	t.Helper()
	out, err := s.Do("INFO", "replication")
	if err != nil {
		t.Fatalf("INFO replication on %s: %v", s.Addr, err)
	}
	return infoField(out, field)
}
