package wake

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
	w := New(Config{Client: c, Block: 100 * time.Millisecond})
	if err := w.Watch(ctx, "order"); err != nil {
		t.Fatal(err)
	}
	gone := w.Wait("order", "k5", w.Mark("order", "k5"))
	note := w.Wait("note", "k5", w.Mark("note", "k5"))
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
	go func() { defer close(done); w.Run(rctx, func(err error) { t.Error(err) }) }()
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

// Idle re-checks of a quiet key, and keys that are signalled once and
// never waited on again, must leave O(1) waiter state per key, never a
// channel per wait or an entry per key ever signalled.
func TestWaiterStateStaysBounded(t *testing.T) {
	w := New(Config{})
	for range 1000 {
		_ = w.Wait("order", "cold", w.Mark("order", "cold"))
	}
	if n := len(w.waiting); n != 1 {
		t.Fatalf("1000 waits on one quiet key left %d wake-up channels, want 1", n)
	}
	w.Forget("order", "cold")
	if n := len(w.waiting); n != 0 {
		t.Fatalf("forget left %d wake-up channels", n)
	}

	w.mu.Lock()
	for i := range 20 * maxSignalled {
		w.signal("order", fmt.Sprintf("k%d", i))
	}
	w.mu.Unlock()
	if n := len(w.last); n >= 2*maxSignalled {
		t.Fatalf("%d keys signalled left %d entries, want fewer than %d", 20*maxSignalled, n, 2*maxSignalled)
	}
}

// Bounding the state must not lose a wake-up: a signal after the mark
// wakes the wait even when the key's entry was pruned meanwhile, and a
// signal before the mark does not.
func TestWaiterWakesAcrossPrune(t *testing.T) {
	w := New(Config{})
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	w.mu.Lock()
	w.signal("order", "a")
	w.mu.Unlock()
	seq := w.Mark("order", "a")
	if closed(w.Wait("order", "a", seq)) {
		t.Fatal("a signal before the mark woke the wait")
	}
	ch := w.Wait("order", "a", seq)
	w.mu.Lock()
	w.signal("order", "a")
	w.mu.Unlock()
	if !closed(ch) {
		t.Fatal("a signal after the wait did not close its channel")
	}

	seq = w.Mark("order", "b")
	w.mu.Lock()
	w.signal("order", "b")
	for i := range 4 * maxSignalled { // pushes b's signal out of the table
		w.signal("order", fmt.Sprintf("k%d", i))
	}
	w.mu.Unlock()
	if _, kept := w.last["order\x00b"]; kept {
		t.Fatal("precondition: b's signal should have been pruned")
	}
	if !closed(w.Wait("order", "b", seq)) {
		t.Fatal("a signal after the mark was lost when the table was pruned")
	}
}
