package runtime

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Finding 1 of issue #11: a retry is fenced. The first attempt fails; its
// lease is deleted during the backoff, long before the heartbeat would
// notice; the owner must not start another attempt under that lease. The
// event is then applied under a new lease, at a higher generation.
func TestRetryStartsOnlyUnderTheLease(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var mu sync.Mutex
	var tokens []string
	failed := make(chan struct{})
	var once sync.Once
	h := keyedHandler("h", func(ctx context.Context, e *testEvent) error {
		li, _ := LeaseFromContext(ctx)
		mu.Lock()
		tokens = append(tokens, li.Token)
		first := len(tokens) == 1
		mu.Unlock()
		if first {
			once.Do(func() { close(failed) })
			// Outlive the backoff's start, so the lease goes while it waits.
			return errPoison
		}
		return nil
	})
	opts := fastOptions("r1")
	opts.LeaseTTL, opts.HeartbeatInterval = 5*time.Second, 2*time.Second // the heartbeat is far off
	opts.Retry.RetryBackoff, opts.Retry.MaxBackoff = 300*time.Millisecond, 300*time.Millisecond
	startEngine(t, c, opts, h)
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	<-failed
	lease := rdb.LeaseKey(rdb.PartitionStream("order", "a"), "h")
	if err := c.Del(ctx, lease).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the event applied again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tokens) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	_, g1, _ := rdb.ParseToken(tokens[0])
	for _, tok := range tokens[1:] {
		if _, g, _ := rdb.ParseToken(tok); tok == tokens[0] || g <= g1 {
			t.Fatalf("attempts ran under %v: a retry started under the deleted lease %s", tokens, tokens[0])
		}
	}
}

// More partitions with work than Concurrency, handlers slower than
// VerifyBound: an attempt's confirmation often goes stale while it waits
// for a slot, and it confirms again. Every slot it takes is given back:
// every entry runs (the first version of the confirm-first gate kept the
// slot it waited for when it found its confirmation stale there and took
// another, until no slot was left and the engine stood still).
func TestGateGivesBackStaleSlots(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	const keys, per = 12, 6
	var ran atomic.Int64
	h := keyedHandler("stale-slots", func(context.Context, *testEvent) error {
		time.Sleep(3 * time.Millisecond) // the handler's work: longer than the bound
		ran.Add(1)
		return nil
	})
	pub := NewPublisher(c)
	for i := range per {
		for k := range keys {
			if err := pub.Publish(ctx, ev(fmt.Sprint("k", k), i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := fastOptions("stale-slots")
	opts.Concurrency, opts.VerifyBound, opts.ReadAhead = 2, time.Millisecond, 1
	startEngine(t, c, opts, h)
	eventually(t, 30*time.Second, "every entry run", func() bool { return ran.Load() == keys*per })
}
