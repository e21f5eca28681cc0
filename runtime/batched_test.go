package runtime

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A batched partition (Registration.AckBatch) that halts acks the entries
// it ran before the head first, so the halted head is the partition's
// oldest pending entry, as under the default promise: a successor's halt
// record check and the operators' tools (inspect, skip) take the oldest
// pending entry for the head.
func TestBatchedHaltAcksWhatRanBefore(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	var mu sync.Mutex
	var ran []int
	h := keyedHandler("batched-halt", func(ctx context.Context, e *testEvent) error {
		mu.Lock()
		ran = append(ran, e.Seq)
		mu.Unlock()
		if e.Seq == 4 {
			return Permanent(fmt.Errorf("seq %d cannot apply", e.Seq))
		}
		return nil
	})
	h.AckBatch = 8
	for i := 1; i <= 6; i++ {
		if err := NewPublisher(c).Publish(ctx, ev("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	halts := make(chan Halt, 1)
	opts := fastOptions("batched-1")
	opts.VerifyBound = time.Minute // no ack goes early for staleness
	opts.OnHalt = func(h Halt) {
		select {
		case halts <- h:
		default:
		}
	}
	startEngine(t, c, opts, h)
	var halt Halt
	select {
	case halt = <-halts:
	case <-time.After(20 * time.Second):
		t.Fatal("no halt")
	}
	mu.Lock()
	got := slices.Clone(ran)
	mu.Unlock()
	if want := []int{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("the handler ran %v, want %v", got, want)
	}
	stream := rdb.PartitionStream("order", "k")
	p, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: h.Name, Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 3 || p[0].ID != halt.EntryID {
		t.Fatalf("pending after the halt: %+v %v; want the head %s first, then the two read ahead", p, err, halt.EntryID)
	}
}
