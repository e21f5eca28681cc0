package runtime

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/inspect"
)

// newRedisCluster starts a private three-master Redis Cluster and returns
// a cluster client seeded with its nodes.
func newRedisCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	cl := redistest.NewCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// Every path of the engine on a real three-master cluster, in process:
// keyed handlers in order across two engines, an unkeyed handler on a
// partitioned and on an unpartitioned category, a pm reading two
// categories, and a halted partition resolved with the inspector. Each
// used to fail with CROSSSLOT (or spin) before the layout was hash-tagged.
// The multi-process guarantee suite runs on a cluster too
// (SEQBY_TOPOLOGY=cluster).
func TestOnRedisCluster(t *testing.T) {
	c, ctx := newRedisCluster(t), ctxT(t)
	j := newJournal()
	var poisoned atomic.Bool
	keyed := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		if e.Poison && !poisoned.Load() {
			return errPoison
		}
		ev := seqKey(e.Client, e.Seq)
		j.enter(e.Client, ev)
		j.leave(e.Client, ev, e.Seq, true)
		return nil
	})
	var audited, noted atomic.Int32
	audit := Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("Client", func(context.Context, *testEvent) error {
		audited.Add(1)
		return nil
	})}}
	notes := noteHandler("notes", func(context.Context, *testNote) error { noted.Add(1); return nil })
	flows := flowPM("flow", func(context.Context, string, string, *pmPayment) error { return nil })
	opts := fastOptions("c1")
	opts.Retry.MaxRetries = 1
	e1 := startEngine(t, c, opts, keyed, audit, notes, flows)
	opts.OwnerID = "c2"
	e2 := startEngine(t, c, opts, keyed, audit, notes, flows)

	p := NewPublisher(c)
	keys := []string{"a", "b", "c", "d", "e", "f"}
	const n = 10
	for i := 1; i <= n; i++ {
		for _, k := range keys {
			if err := p.Publish(ctx, &testEvent{Client: k, Seq: i, Poison: k == "f" && i == 1}); err != nil {
				t.Fatal(err)
			}
		}
		// Twice with one message id: the second is deduplicated, by a
		// script whose two keys share the stream's slot.
		for range 2 {
			if err := p.Publish(ctx, &testNote{Text: "n"}, WithMessageID(fmt.Sprintf("note-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range []string{"o-1", "o-2"} {
			if err := p.Publish(ctx, &pmOrder{OrderID: o, Seq: i}); err != nil {
				t.Fatal(err)
			}
			if err := p.Publish(ctx, &pmPayment{OrderID: o, Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range keys[:5] {
		eventually(t, 30*time.Second, "key "+k+" applied", func() bool { return j.count(k) >= n })
		if got := j.seqs(k); !inOrder(got, n) {
			t.Errorf("key %s applied %v, want 1..%d in order", k, got, n)
		}
	}
	store := NewRedisStateStore(c)
	for _, o := range []string{"o-1", "o-2"} {
		eventually(t, 30*time.Second, "pm "+o+" complete", func() bool {
			f, _ := loadFlow(t, store, "flow", o)
			return len(f.Orders) == n && len(f.Payments) == n
		})
		if f, _ := loadFlow(t, store, "flow", o); !slices.Equal(f.Orders, seq(n)) || !slices.Equal(f.Payments, seq(n)) {
			t.Errorf("pm %s state %+v, want each category 1..%d in order", o, f, n)
		}
	}
	eventually(t, 30*time.Second, "unkeyed handlers saw every event", func() bool {
		return audited.Load() >= int32(len(keys)*n-1) && noted.Load() == n
	})

	// f halted on its first event: listed from the cluster, moved to the
	// DLQ, and f continues in order.
	in := inspect.New(c)
	var hs []inspect.HaltRecord
	eventually(t, 30*time.Second, "f halted", func() bool {
		var err error
		hs, err = in.Halts(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(hs) == 1
	})
	if j.count("f") != 0 || hs[0].Partition != "order:{f}" || hs[0].Handler != "orders" {
		t.Fatalf("halts %+v, f applied %v: want f halted at its head", hs, j.seqs("f"))
	}
	if _, err := in.Inspect(ctx, "orders", "order:{f}"); err != nil {
		t.Fatal(err)
	}
	res, err := in.MoveToDLQ(ctx, "orders", hs[0].Partition, hs[0].EntryID)
	if err != nil || res.DLQ != "order:{f}:dlq" {
		t.Fatalf("move to DLQ: %+v, %v", res, err)
	}
	eventually(t, 30*time.Second, "f continues", func() bool { return j.count("f") == n-1 })
	if got := j.seqs("f"); !slices.Equal(got, seq(n)[1:]) {
		t.Errorf("f applied %v after its head was moved, want 2..%d", got, n)
	}
	if len(j.overlap) > 0 {
		t.Fatalf("same-key events overlapped: %v", j.overlap)
	}
	// Idle partitions were woken by signals read from every category's
	// signal stream (one blocking reader per category on a cluster), not
	// only by the periodic re-check.
	for _, e := range []*running{e1, e2} {
		if e.wake.Stats("", "").Total == 0 {
			t.Errorf("engine %s read no wake-up signal", e.OwnerID())
		}
	}
}
