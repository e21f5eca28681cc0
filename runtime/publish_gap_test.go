package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A publish is three steps (index, entry, signal; rdb.Publish). A
// publisher that dies after the first leaves an indexed partition without
// a stream, which reads as empty; one that dies after the second leaves an
// entry without its signal, which discovery still finds. Neither loses a
// later entry nor halts anything.
func TestPublishStepsLeaveNothingBehind(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	// Died after step 1: "ghost" is indexed, its stream never written.
	if err := c.SAdd(ctx, rdb.IndexKey("order"), "ghost").Err(); err != nil {
		t.Fatal(err)
	}
	// Died after step 2: "late" is indexed and has its entry, no signal.
	if err := c.SAdd(ctx, rdb.IndexKey("order"), "late").Err(); err != nil {
		t.Fatal(err)
	}
	payload, _ := JSON.Marshal(ev("late", 1))
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.PartitionStream("order", "late"),
		Values: []any{rdb.FieldType, "testEvent", rdb.FieldPayload, payload}}).Err(); err != nil {
		t.Fatal(err)
	}
	j := newJournal()
	h := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	halts := make(chan Halt, 1)
	opts := fastOptions("g1")
	opts.OnHalt = func(h Halt) { halts <- h }
	startEngine(t, c, opts, h)
	eventually(t, 20*time.Second, "the unsignalled entry applied", func() bool { return j.count("late") == 1 })
	p := NewPublisher(c)
	for _, m := range []*testEvent{ev("ghost", 1), ev("late", 2)} {
		if err := p.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "later entries applied", func() bool { return j.count("ghost") == 1 && j.count("late") == 2 })
	select {
	case h := <-halts:
		t.Fatalf("halt %+v", h)
	default:
	}
}
