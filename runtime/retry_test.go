package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A handler error wrapped by Permanent halts at once, is never retried,
// and says so in the Halt; a handler's RetryPolicy overrides the engine's
// options; and a halted head that later succeeds resumes its partition by
// itself and removes its halt record (issue #11, finding 3).
func TestRetryPolicyAndPermanentErrors(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var permTries, flakyTries atomic.Int64
	var mu sync.Mutex
	halts := map[string]Halt{}
	perm := keyedHandler("perm", func(_ context.Context, e *testEvent) error {
		if e.Client == "b" && e.Seq == 1 {
			permTries.Add(1)
			return Permanent(errPoison)
		}
		return nil
	})
	j := newJournal()
	flaky := keyedHandler("flaky", func(_ context.Context, e *testEvent) error {
		if e.Client == "b" && e.Seq == 1 && flakyTries.Add(1) <= 4 {
			return errors.New("not yet")
		}
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	flaky.Retry = &RetryPolicy{MaxRetries: -1} // halts after its first failure
	opts := fastOptions("r1")
	opts.Retry.MaxRetries = 3
	opts.Retry.HaltedRetryInterval = 50 * time.Millisecond
	opts.OnHalt = func(h Halt) { mu.Lock(); halts[h.Handler] = h; mu.Unlock() }
	startEngine(t, c, opts, perm, flaky)
	p := NewPublisher(c)
	for i := 1; i <= 2; i++ {
		if err := p.Publish(ctx, ev("b", i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "flaky resumed after its halted head succeeded", func() bool { return j.count("b") == 2 })
	mu.Lock()
	hp, hf := halts["perm"], halts["flaky"]
	mu.Unlock()
	if !hp.Permanent || !errors.Is(hp.Err, ErrPermanent) || !errors.Is(hp.Err, errPoison) {
		t.Errorf("perm's halt: permanent %v, err %v; want a permanent halt wrapping errPoison", hp.Permanent, hp.Err)
	}
	// flaky's head was retried slowly four times: perm's would have been
	// too, were a permanent halt retried.
	if n := permTries.Load(); n != 1 {
		t.Errorf("perm ran its permanent failure %d times, want 1", n)
	}
	if hf.Handler == "" || hf.Permanent || hf.Reason != "handler failed 1 times" {
		t.Errorf("flaky's halt %+v: want one after 1 attempt (its own MaxRetries), not permanent", hf)
	}
	key := rdb.MetaKey(rdb.LeaseKey(rdb.PartitionStream("order", "b"), "flaky"))
	eventually(t, 10*time.Second, "flaky's halt record removed", func() bool { return !c.HExists(ctx, key, rdb.MetaHalt).Val() })
	if !c.HExists(ctx, rdb.MetaKey(rdb.LeaseKey(rdb.PartitionStream("order", "b"), "perm")), rdb.MetaHalt).Val() {
		t.Errorf("perm's halt record is gone")
	}
}

// A permanent failure says "permanent" once: Permanent adds no text of its
// own (the halt's reason says it), and wrapping an error already marked
// adds nothing either. Before issue #26 a halt read "handler failed
// permanently: permanent: ...", and "permanent: permanent: ..." once more
// per layer that marked it again.
func TestPermanentSaysItOnce(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"marked once", Permanent(errPoison), "poison"},
		{"marked twice", Permanent(Permanent(errPoison)), "poison"},
		{"marked, wrapped, marked", Permanent(fmt.Errorf("validate: %w", Permanent(errPoison))), "validate: poison"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, ErrPermanent) || !errors.Is(tt.err, errPoison) {
				t.Errorf("%v: want errors.Is ErrPermanent and errPoison", tt.err)
			}
		})
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}

	// The halt as the engine reports it: reason and error together, and
	// in the halt record operators read.
	c, ctx := newRedis(t), ctxT(t)
	halts := make(chan Halt, 1)
	opts := fastOptions("pm1")
	opts.OnHalt = func(h Halt) { halts <- h }
	startEngine(t, c, opts, keyedHandler("perm", func(context.Context, *testEvent) error {
		return Permanent(Permanent(errPoison))
	}))
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	var h Halt
	select {
	case h = <-halts:
	case <-ctx.Done():
		t.Fatal("no halt reported")
	}
	if got, want := h.Reason+": "+h.Err.Error(), "handler failed permanently: poison"; got != want || !h.Permanent {
		t.Errorf("halt reads %q (permanent %v), want %q (permanent)", got, h.Permanent, want)
	}
	key := rdb.MetaKey(rdb.LeaseKey(rdb.PartitionStream("order", "a"), "perm"))
	eventually(t, 10*time.Second, "the halt record written", func() bool { return c.HExists(ctx, key, rdb.MetaHalt).Val() })
	raw, err := c.HGet(ctx, key, rdb.MetaHalt).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(raw, "permanent"); n != 1 {
		t.Errorf("the halt record says permanent %d times, want once (its reason): %s", n, raw)
	}
}
