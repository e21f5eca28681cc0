package executor

import (
	"context"
	"testing"
)

func TestEntryAfter(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"2-0", "1-9", true}, {"1-10", "1-9", true}, {"1-9", "1-10", false},
		{"10-0", "9-0", true}, {"5-0", "5-0", false},
	} {
		if got := EntryAfter(tt.a, tt.b); got != tt.want {
			t.Errorf("EntryAfter(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// Each accessor reads what its With put, and nothing of another's.
func TestContextKeys(t *testing.T) {
	ctx := context.Background()
	if _, ok := LeaseFrom(ctx); ok {
		t.Error("a lease in an empty context")
	}
	if _, ok := MessageFrom(ctx); ok {
		t.Error("a message in an empty context")
	}
	if _, _, ok := AppliedFrom(ctx); ok {
		t.Error("an applied mark in an empty context")
	}
	ctx = WithLease(ctx, LeaseInfo{Key: "k", Generation: 7})
	ctx = WithMessage(ctx, MessageInfo{EntryID: "1-0", Attempt: 2})
	ctx = WithCorrelation(ctx, "o-1")
	ctx = WithApplied(ctx, "s", "3-0")
	if li, ok := LeaseFrom(ctx); !ok || li.Key != "k" || li.Generation != 7 {
		t.Errorf("LeaseFrom = %+v, %v", li, ok)
	}
	if mi, ok := MessageFrom(ctx); !ok || mi.EntryID != "1-0" || mi.Attempt != 2 {
		t.Errorf("MessageFrom = %+v, %v", mi, ok)
	}
	if v, ok := CorrelationFrom(ctx); !ok || v != "o-1" {
		t.Errorf("CorrelationFrom = %q, %v", v, ok)
	}
	if s, id, ok := AppliedFrom(ctx); !ok || s != "s" || id != "3-0" {
		t.Errorf("AppliedFrom = %q, %q, %v", s, id, ok)
	}
	if _, ok := ClientFrom(ctx); ok {
		t.Error("a client in a context that has none")
	}
}
