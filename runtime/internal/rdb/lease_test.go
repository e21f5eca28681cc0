package rdb

import (
	"errors"
	"testing"
	"time"
)

func TestLeaseAcquireRenewRelease(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ref := PartitionLease("order:a", "h")
	l, err := Acquire(ctx, c, ref, "p1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Generation != 1 || l.Token() != "p1:1" {
		t.Fatalf("got %+v token %s, want generation 1 token p1:1", l, l.Token())
	}
	if got := c.Get(ctx, ref.Key).Val(); got != "p1:1" {
		t.Fatalf("lease key holds %q", got)
	}
	if _, err := Acquire(ctx, c, ref, "p2", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second acquire: %v, want ErrLeaseHeld", err)
	}
	if err := l.Renew(ctx, c, time.Minute); err != nil {
		t.Fatalf("renew: %v", err)
	}
	stale := Lease{Ref: ref, Owner: "p1", Generation: 7}
	if err := stale.Renew(ctx, c, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew with a wrong token: %v, want ErrLeaseLost", err)
	}
	if err := stale.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.Exists(ctx, ref.Key).Val() != 1 {
		t.Fatal("release with a wrong token deleted the lease")
	}
	if err := l.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.Exists(ctx, ref.Key).Val() != 0 {
		t.Fatal("release did not delete the lease")
	}
	if err := l.Renew(ctx, c, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew after release: %v, want ErrLeaseLost", err)
	}
	l2, err := Acquire(ctx, c, ref, "p2", time.Minute)
	if err != nil || l2.Generation != 2 {
		t.Fatalf("re-acquire after release: %+v %v, want generation 2", l2, err)
	}
}

func TestLeaseExpiryThenReacquireIncrementsGeneration(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ref := PartitionLease("order:a", "h")
	l1, err := Acquire(ctx, c, ref, "p1", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "lease expiry", func() bool { return c.Exists(ctx, ref.Key).Val() == 0 })
	l2, err := Acquire(ctx, c, ref, "p2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Generation != l1.Generation+1 {
		t.Fatalf("generation %d after %d", l2.Generation, l1.Generation)
	}
	if err := l1.Renew(ctx, c, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("expired owner renewed: %v", err)
	}
	// The counter survives the lease key (and partition reaping).
	c.Del(ctx, ref.Key)
	l3, _ := Acquire(ctx, c, ref, "p1", time.Minute)
	if l3.Generation != 3 {
		t.Fatalf("generation went to %d, want 3", l3.Generation)
	}
}

func TestParseToken(t *testing.T) {
	tests := []struct {
		token, owner string
		gen          int64
		ok           bool
	}{
		{"p1:3", "p1", 3, true},
		{"host:12:7", "host:12", 7, true},
		{"nogen", "", 0, false},
		{"p1:x", "", 0, false},
	}
	for _, tt := range tests {
		o, g, err := ParseToken(tt.token)
		if (err == nil) != tt.ok || (tt.ok && (o != tt.owner || g != tt.gen)) {
			t.Errorf("ParseToken(%q) = %q, %d, %v", tt.token, o, g, err)
		}
	}
}
