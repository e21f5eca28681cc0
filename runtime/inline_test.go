package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestInlineBrokerOrder(t *testing.T) {
	b := NewInlineBroker(nil)
	var got []string
	h := keyedHandler("h", func(ctx context.Context, e *testEvent) error {
		got = append(got, seqKey(e.Client, e.Seq))
		if e.Seq == 1 && e.Client == "a" {
			// Published from inside a handler: queued, not run re-entrantly.
			if err := b.Publish(ctx, ev(e.Client, 100)); err != nil {
				return err
			}
			got = append(got, "after-publish")
		}
		return nil
	})
	if err := b.Register(h); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, m := range []*testEvent{ev("a", 1), ev("b", 1), ev("a", 2)} {
		if err := b.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a/1", "after-publish", "a/100", "b/1", "a/2"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestInlineBrokerErrors(t *testing.T) {
	b := NewInlineBroker(nil)
	b.Register(keyedHandler("h", func(ctx context.Context, e *testEvent) error {
		if e.Poison {
			panic("bad message")
		}
		return nil
	}))
	ctx := context.Background()
	if err := b.Publish(ctx, ev("a:b", 1)); !errors.Is(err, ErrKeyColon) {
		t.Fatalf("bad key: %v", err)
	}
	if err := b.Publish(ctx, &testEvent{Client: "a", Poison: true}); !errors.Is(err, ErrHandlerPanic) {
		t.Fatalf("panic: %v", err)
	}
	if err := b.Publish(ctx, ev("b", 1)); err != nil {
		t.Fatalf("another key after a panic: %v", err)
	}
}

// TestInlineBrokerHalts: as on the engine, a message that fails after its
// retries halts its partition; later messages of the key are held until
// Skip or Retry, other keys go on, and each attempt has a lease and its
// MessageInfo in its context.
func TestInlineBrokerHalts(t *testing.T) {
	var (
		applied  []string
		attempts = map[string]int{}
		failing  = true
		leases   []LeaseInfo
	)
	b := NewInlineBroker()
	h := keyedHandler("h", func(ctx context.Context, e *testEvent) error {
		li, ok := LeaseFromContext(ctx)
		if !ok {
			t.Errorf("%s: no lease in the handler's context", seqKey(e.Client, e.Seq))
		}
		leases = append(leases, li)
		mi, ok := MessageFromContext(ctx)
		if !ok || mi.Attempt < 1 || mi.MessageID == "" {
			t.Errorf("%s: MessageInfo %+v %v", seqKey(e.Client, e.Seq), mi, ok)
		}
		attempts[seqKey(e.Client, e.Seq)]++
		if e.Poison && failing {
			return errPoison
		}
		applied = append(applied, seqKey(e.Client, e.Seq))
		return nil
	})
	h.Retry = &RetryPolicy{MaxRetries: 2}
	if err := b.Register(h); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Publish(ctx, &testEvent{Client: "a", Seq: 1, Poison: true}); !errors.Is(err, errPoison) {
		t.Fatalf("failing message: %v", err)
	}
	if got := attempts["a/1"]; got != 3 {
		t.Fatalf("attempts of the failing message = %d, want 3 (1 + MaxRetries 2)", got)
	}
	for _, m := range []*testEvent{ev("a", 2), ev("b", 1), ev("a", 3)} {
		if err := b.Publish(ctx, m); err != nil {
			t.Fatalf("publish %v: %v", m, err)
		}
	}
	if got := strings.Join(applied, " "); got != "b/1" {
		t.Fatalf("applied %q while a is halted, want only b/1", got)
	}
	hs := b.Halts()
	if len(hs) != 1 || hs[0].Handler != "h" || hs[0].Key != "a" || !errors.Is(hs[0].Err, errPoison) || hs[0].Stream != "order:{a}" {
		t.Fatalf("Halts = %+v", hs)
	}
	if err := b.Retry(ctx, "h", "a"); !errors.Is(err, errPoison) || len(b.Halts()) != 1 {
		t.Fatalf("Retry of a still failing head: %v, halts %v", err, b.Halts())
	}
	failing = false
	if err := b.Retry(ctx, "h", "a"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if got := strings.Join(applied, " "); got != "b/1 a/1 a/2 a/3" {
		t.Fatalf("applied %q after the retry, want b/1 a/1 a/2 a/3", got)
	}
	if len(b.Halts()) != 0 {
		t.Fatalf("halts after the retry: %v", b.Halts())
	}
	if err := b.Skip(ctx, "h", "a"); !errors.Is(err, ErrNotHalted) {
		t.Fatalf("Skip of a running partition: %v", err)
	}
	want := LeaseInfo{Handler: "h", Category: "order", Key: "a", Token: "inline:1", Generation: 1, LeaseKey: "order:{a}:__lease__:h"}
	if leases[0] != want {
		t.Fatalf("lease %+v, want %+v", leases[0], want)
	}

	// Skip drops the head and delivers what was held.
	failing = true
	applied = nil
	b.Publish(ctx, &testEvent{Client: "c", Seq: 1, Poison: true})
	b.Publish(ctx, ev("c", 2))
	if err := b.Skip(ctx, "h", "c"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(applied, " "); got != "c/2" {
		t.Fatalf("applied %q after Skip, want c/2", got)
	}
}
