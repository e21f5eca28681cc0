package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Cold partitions end: once every partition is handled and idle for
// ReapAfter, their owners let them go and the reaper removes them, for a
// keyed handler, an unkeyed one and a pm alike: no partition stream,
// lease, generation or index entry is left, and nobody owns anything.
// Publishing to a reaped key recreates its partition, handled in order.
func TestReaperEndsColdPartitions(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	j := newJournal()
	orders := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	var audited, flows atomic.Int64
	audit := Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("Client", func(context.Context, *testEvent) error {
		audited.Add(1)
		return nil
	})}}
	pm := flowPM("flow", func(context.Context, string, string, *pmPayment) error { flows.Add(1); return nil })
	var engines []*running
	for _, owner := range []string{"r1", "r2"} {
		opts := fastOptions(owner)
		opts.ReapAfter = 300 * time.Millisecond
		engines = append(engines, startEngine(t, c, opts, orders, audit, pm))
	}
	p := NewPublisher(c)
	publish := func(m Message, opts ...PublishOption) {
		t.Helper()
		if err := p.Publish(ctx, m, opts...); err != nil {
			t.Fatal(err)
		}
	}
	const keys, n = 6, 3
	for i := 1; i <= n; i++ {
		for k := range keys {
			publish(ev(fmt.Sprint("k", k), i))
			publish(&pmOrder{OrderID: fmt.Sprint("o", k), Seq: i})
			publish(&pmPayment{OrderID: fmt.Sprint("o", k), Seq: i}, AsBackfill())
		}
	}
	eventually(t, 20*time.Second, "everything handled", func() bool {
		for k := range keys {
			if j.count(fmt.Sprint("k", k)) != n {
				return false
			}
		}
		return audited.Load() == keys*n && flows.Load() == 2*keys*n
	})
	for _, cat := range []string{"order", "pmorder", "pmpayment"} {
		eventually(t, 20*time.Second, cat+" reaped", func() bool {
			ks, err := rdb.Partitions(ctx, c, cat)
			return err == nil && len(ks) == 0
		})
	}
	eventually(t, 10*time.Second, "no partition owned", func() bool {
		return len(engines[0].Status().Partitions) == 0 && len(engines[1].Status().Partitions) == 0
	})
	var left []string
	for _, pattern := range []string{"order:*", "pmorder:*", "pmpayment:*", "{o*}:__pmlease__:*", "{o*}:__pmgen__:*", "{k*}*"} {
		for _, k := range scanAll(t, c, pattern) {
			// A publish's message id outlives the partition until its
			// window ends (PublisherOptions.ResendWindow): its end.
			if strings.Contains(k, ":__msgid__:") {
				if ttl := c.PTTL(ctx, k).Val(); ttl > 0 && ttl <= time.Minute {
					continue
				}
			}
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		t.Fatalf("left after reaping: %v", left)
	}
	if got := scanAll(t, c, "{o*}:__pmstate__:*"); len(got) != keys {
		t.Fatalf("pm states %v: reaping must keep them", got)
	}

	// A reaped key comes back with its next publish.
	publish(ev("k0", n+1))
	publish(&pmOrder{OrderID: "o0", Seq: n + 1})
	eventually(t, 20*time.Second, "the recreated partitions handled", func() bool {
		return j.count("k0") == n+1 && flows.Load() == 2*keys*n+1
	})
	if got := j.seqs("k0"); !slices.Equal(got, seq(n+1)) {
		t.Fatalf("k0 applied %v", got)
	}
	if len(j.overlap) > 0 {
		t.Fatalf("same-key events overlapped: %v", j.overlap)
	}
}

// scanAll lists the keys matching pattern.
func scanAll(t *testing.T, c *redis.Client, pattern string) []string {
	t.Helper()
	var out []string
	iter := c.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A partition whose last owner acked its entries and let it go before
// trimming them (a handover between the ack and the trim) still turns
// cold: its next owner trims what it finds acked, though it acked
// nothing itself, and the reaper ends it. (It stayed forever, until the
// key's next publish, when only a worker's own acks made a trim due.)
func TestNewOwnerTrimsItsPredecessorsAcks(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var ran atomic.Int64
	orders := keyedHandler("orders", func(context.Context, *testEvent) error { ran.Add(1); return nil })
	p := NewPublisher(c)
	for i := 1; i <= 3; i++ {
		if err := p.Publish(ctx, ev("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The predecessor: it read and acked every entry, and did not trim.
	stream := rdb.PartitionStream("order", "k")
	if _, err := rdb.RegisterGroup(ctx, c, "order", "orders", false); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.CreateGroup(ctx, c, stream, "orders", false); err != nil {
		t.Fatal(err)
	}
	es, err := rdb.ReadGroup(ctx, c, stream, "orders", "gone~1:1", ">", 10, -1)
	if err != nil || len(es) != 3 {
		t.Fatalf("the predecessor's read: %v, %v", es, err)
	}
	for _, e := range es {
		c.XAck(ctx, stream, "orders", e.ID)
	}
	opts := fastOptions("r1")
	opts.ReapAfter = 300 * time.Millisecond
	startEngine(t, c, opts, orders)
	eventually(t, 20*time.Second, "the partition reaped", func() bool {
		ks, err := rdb.Partitions(ctx, c, "order")
		return err == nil && len(ks) == 0
	})
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d acked entries again", n)
	}
}
