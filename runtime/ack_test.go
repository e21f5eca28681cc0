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
	p, err := c.XPending(ctx, rdb.PartitionStream("order", "a"), "orders").Result()
	if err != nil || p.Count != 0 {
		t.Fatalf("pending after a graceful stop: %+v, %v", p, err)
	}
}
