package runtime

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// TestCatalogSkipsOtherHandlersTypes: an entry of a type the registration's
// Catalog lists but no local handler routes (another service's handler
// reads it) is acked and skipped; a type listed nowhere halts.
func TestCatalogSkipsOtherHandlersTypes(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var mu sync.Mutex
	var seen []int
	h := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		mu.Lock()
		seen = append(seen, e.Seq)
		mu.Unlock()
		return nil
	})
	h.Catalog = map[string][]string{"order": {"testCancelled", "testEvent"}}
	halts := make(chan Halt, 4)
	opts := fastOptions("cat1")
	opts.OnHalt = func(h Halt) { halts <- h }
	startEngine(t, c, opts, h)

	raw := func(key, typ, payload string) {
		t.Helper()
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.PartitionStream("order", key), Values: []any{rdb.FieldType, typ, rdb.FieldPayload, payload}}).Err(); err != nil {
			t.Fatal(err)
		}
		c.SAdd(ctx, rdb.IndexKey("order"), key)
	}
	raw("k", "testEvent", `{"client":"k","seq":1}`)
	raw("k", "testCancelled", `{}`)
	raw("k", "testEvent", `{"client":"k","seq":3}`)
	raw("u", "Novel", `{}`)
	NewPublisher(c, PublisherOptions{}).Publish(ctx, ev("k", 4)) // wakes the engine

	eventually(t, 20*time.Second, "k's events applied past the catalogued type", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 3
	})
	mu.Lock()
	if !slices.Equal(seen, []int{1, 3, 4}) {
		t.Errorf("applied %v, want [1 3 4]", seen)
	}
	mu.Unlock()
	select {
	case h := <-halts:
		if h.Key != "u" || h.Reason != "unknown message type" {
			t.Errorf("halt %+v, want key u halted on an unknown message type", h)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a type listed nowhere did not halt its partition")
	}
}
