package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// An entry's ack rides on the next read; a worker handing over right
// after an entry (here Run ends while the handler runs) sends that ack on
// its own, so its successor does not run the entry again.
func TestHandoverAcksTheLastEntry(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	inside, release := make(chan struct{}), make(chan struct{})
	r := startEngine(t, c, fastOptions("a1"), keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		if e.Seq == 3 {
			close(inside)
			<-release
		}
		return nil
	}))
	for i := 1; i <= 3; i++ {
		if err := NewPublisher(c).Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	<-inside
	stopped := make(chan struct{})
	go func() { r.stop(); close(stopped) }()
	eventually(t, 10*time.Second, "the instance leaving its member set", func() bool {
		live, err := rdb.LiveMembers(ctx, c, "orders", time.Minute)
		return err == nil && !live["a1"]
	})
	close(release)
	<-stopped
	stream := rdb.PartitionStream("order", "a")
	p, err := c.XPending(ctx, stream, laneGroup(t, c, stream, "orders")).Result()
	if err != nil || p.Count != 0 {
		t.Fatalf("pending after a graceful stop: %+v, %v", p, err)
	}
}

// A lease Redis granted to this instance but no worker of it runs (an
// acquire whose reply was lost to the cycle's deadline, or sent twice by
// the client) is adopted at the next cycle, instead of leaving the
// partition unowned for a LeaseTTL.
func TestOrphanLeaseIsAdopted(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	applied := make(chan struct{}, 1)
	opts := fastOptions("o1")
	opts.LeaseTTL, opts.HeartbeatInterval = time.Minute, 10*time.Second
	e, err := NewEngine(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The lost acquire: granted in Redis to this engine's incarnation,
	// unknown to it.
	if _, err := rdb.Acquire(ctx, c, rdb.PartitionLease(rdb.PartitionStream("order", "a"), "orders"), e.incarnation, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.Register(keyedHandler("orders", func(context.Context, *testEvent) error {
		select {
		case applied <- struct{}{}:
		default:
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	cancel, _, _ := startRun(t, e)
	defer cancel()
	select {
	case <-applied:
	case <-time.After(20 * time.Second):
		t.Fatal("the partition whose lease this instance held in Redis was not processed (it waits for the lease to expire)")
	}
}
