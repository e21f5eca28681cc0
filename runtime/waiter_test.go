package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A reader that fell behind the signal stream's cap finds signals trimmed
// before it read them: every wait of the category wakes (one read per idle
// partition) instead of one whose signal is gone waiting for ever.
func TestWaiterWakesAllAfterLostSignals(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	w := newWaiter(c, 100*time.Millisecond)
	if err := w.watch(ctx, "order"); err != nil {
		t.Fatal(err)
	}
	gone := w.wait("order", "k5", w.mark("order", "k5"))
	note := w.wait("note", "k5", w.mark("note", "k5"))
	// 1,500 signals while the reader is away, trimmed to the last 1,100:
	// k0..k399 are lost.
	pipe := c.Pipeline()
	for i := range 1500 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: rdb.SignalKey("order"), Values: []any{"k", fmt.Sprint("k", i)}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.XTrimMaxLen(ctx, rdb.SignalKey("order"), 1100).Err(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.run(rctx, func(err error) { t.Error(err) }) }()
	defer func() { cancel(); <-done }()
	select {
	case <-gone:
	case <-time.After(20 * time.Second):
		t.Fatal("a wait whose signal was trimmed before it was read never woke")
	}
	select {
	case <-note:
		t.Fatal("a wait of another category woke")
	default:
	}
}
