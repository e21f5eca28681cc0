package runtime

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Finding 5 of issue #11: a stuck handler no longer holds its partition
// forever in silence. An attempt past the handler's timeout has its
// context cancelled and counts as failed, so the partition halts and
// alerts; a body that ignores its context is reported as stuck.
func TestStuckHandlerTimesOut(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stuck := keyedHandler("stuck", func(ctx context.Context, e *testEvent) error {
		if e.Client == "a" {
			<-ctx.Done() // never returns by itself
			return ctx.Err()
		}
		return nil
	})
	stuck.Timeout = 100 * time.Millisecond
	deafDone := make(chan struct{})
	deaf := keyedHandler("deaf", func(ctx context.Context, e *testEvent) error {
		if e.Client == "a" {
			<-deafDone // ignores its context
		}
		return nil
	})
	deaf.Timeout = 50 * time.Millisecond
	var logs syncBuffer
	var mu sync.Mutex
	var halts []Halt
	opts := fastOptions("r1")
	opts.Retry.MaxRetries, opts.Retry.HaltedRetryInterval = 1, -1
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	opts.OnHalt = func(h Halt) { mu.Lock(); halts = append(halts, h); mu.Unlock() }
	startEngine(t, c, opts, stuck, deaf)
	t.Cleanup(func() { close(deafDone) }) // before the engine stops
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the stuck handler's partition halted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(halts) > 0
	})
	mu.Lock()
	h := halts[0]
	mu.Unlock()
	if h.Handler != "stuck" || !errors.Is(h.Err, ErrHandlerTimeout) || h.Reason != "handler failed 2 times" {
		t.Errorf("halt %+v: want stuck's, after 2 timed-out attempts", h)
	}
	eventually(t, 20*time.Second, "the deaf handler reported as stuck", func() bool {
		return strings.Contains(logs.String(), "ignores its context") && strings.Contains(logs.String(), "handler=deaf")
	})
}
