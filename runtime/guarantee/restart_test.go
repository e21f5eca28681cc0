package guarantee

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// outage runs two engine instances against a fresh three-master cluster
// shaped by cfg: it publishes the first half of n events of each key,
// waits for some progress, then publishes the second half from a goroutine
// that retries what the cluster refuses (a publisher's backoff) while
// disrupt changes the cluster, and returns once every event is applied,
// order and exclusivity checked (exempt as checkExclusive takes it).
// refused counts the publishes the cluster refused so far.
func outage(t *testing.T, cfg redistest.Config, keys []string, n int, exempt func(window) bool,
	disrupt func(ctx context.Context, nodes *redistest.Cluster, c *cluster, refused *atomic.Int32)) *redistest.Cluster {
	if !onCluster() {
		t.Skip("runs on the cluster topology (SEQBY_TOPOLOGY=cluster, part of make test)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes, err := redistest.StartCluster(ctx, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Close)
	c := newClusterAt(t, ttl, strings.Join(nodes.Addrs(), ","))
	c.start("i1")
	c.start("i2")
	var first, second [][]Step
	for _, k := range keys {
		first = append(first, slow(5, steps(k, 1, n/2)))
		second = append(second, slow(5, steps(k, n/2+1, n)))
	}
	c.publish(interleave(first...)...)
	c.waitApplied(30*time.Second, 3, keys...)
	var refused atomic.Int32
	published := make(chan struct{})
	go func() {
		defer close(published)
		for _, s := range interleave(second...) {
			for ctx.Err() == nil && c.pub.Publish(ctx, s) != nil {
				refused.Add(1)
				time.Sleep(20 * time.Millisecond) // a publisher's retry backoff
			}
		}
	}()
	disrupt(ctx, nodes, c, &refused)
	select {
	case <-published:
	case <-ctx.Done():
		t.Fatal("publishing did not finish")
	}
	c.waitApplied(60*time.Second, n, keys...)
	for _, k := range keys {
		if r := c.checkOrder(k, n); r > 0 {
			t.Logf("%s: %d re-runs across the disruption (at-least-once)", k, r)
		}
		c.checkExclusive(k, exempt)
	}
	return nodes
}

// nodeOf returns the node serving key's slot.
func nodeOf(t *testing.T, nodes *redistest.Cluster, key string) (int, *redistest.Server) {
	t.Helper()
	for i, s := range nodes.Nodes {
		if _, err := s.Do("EXISTS", key); err == nil { // the others answer MOVED
			return i, s
		}
	}
	t.Fatalf("no node serves %s", key)
	return 0, nil
}

// TestClusterMasterRestart: on a three-master cluster whose nodes fsync
// every write to their append-only file, SIGKILL the master holding
// client-A's partition mid-run, keep publishing (retrying what the dead
// node refuses), and restart it from its AOF. The engines ride out the
// outage (errors retried, leases on that node lost and taken again; the
// fence holds because a partition's lease and streams live on one node and
// move together): every key ends with every event applied in order
// (re-runs allowed), and no two events of a key ever overlapped.
func TestClusterMasterRestart(t *testing.T) {
	keys := []string{"client-A", "client-B", "client-C", "client-D", "client-E", "client-F"}
	// A run whose exit record was refused by the dead node has no end (the
	// same run is re-run after the restart); the in-progress marker still
	// catches an overlap with it.
	open := func(w window) bool { return w.To == openEnd }
	outage(t, redistest.Config{Persist: true}, keys, 30, open,
		func(ctx context.Context, nodes *redistest.Cluster, c *cluster, refused *atomic.Int32) {
			_, victim := nodeOf(t, nodes, rdb.PartitionStream(Category, "client-A"))
			victim.Kill()
			c.eventually(30*time.Second, "a publish refused by the dead master", func() bool { return refused.Load() > 0 })
			if err := victim.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if err := nodes.WaitOK(ctx); err != nil {
				t.Fatal(err)
			}
		})
}

// TestClusterSlotMigration: move client-A's hash slot (its streams, lease,
// counter and the suite's records) to another master while two engines
// consume it and events keep arriving, as a resharding does. Clients meet
// ASK, TRYAGAIN and MOVED on the way and retry them; the partition's lease
// and streams move together, so the fence holds throughout: every event
// applied in order, never two of a key at once.
func TestClusterSlotMigration(t *testing.T) {
	keys := []string{"client-A", "client-B", "client-C"}
	nodes := outage(t, redistest.Config{}, keys, 40, nil,
		func(ctx context.Context, nodes *redistest.Cluster, _ *cluster, _ *atomic.Int32) {
			stream := rdb.PartitionStream(Category, "client-A")
			owner, _ := nodeOf(t, nodes, stream)
			if _, err := nodes.MoveSlot(ctx, stream, (owner+1)%len(nodes.Nodes)); err != nil {
				t.Fatal(err)
			}
		})
	// The clients did meet the move: the servers answered with redirects.
	redirects := 0
	for _, s := range nodes.Nodes {
		stats, err := s.Do("INFO", "errorstats")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(stats, "\n") {
			for _, e := range []string{"errorstat_MOVED:count=", "errorstat_ASK:count=", "errorstat_TRYAGAIN:count="} {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), e); ok {
					n, _ := strconv.Atoi(v)
					redirects += n
				}
			}
		}
	}
	if redirects == 0 {
		t.Fatal("no MOVED, ASK or TRYAGAIN reply while the slot moved: the test did not exercise a resharding")
	}
	t.Logf("%d redirect replies during the migration", redirects)
}
