package runtime

import (
	"context"
	"errors"
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
	if err := b.Publish(ctx, ev("a", 2)); err != nil {
		t.Fatalf("after a panic: %v", err)
	}
}
