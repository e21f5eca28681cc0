package rdb

import (
	"testing"
	"time"
)

// The admitted age read is the largest stored while it lasts: a lower
// one stored later (another incarnation's, or this one's late resend)
// does not lower it; members past their end go at the next store, and the
// set ends with its last member.
func TestAdmitAgeIsTheLargestWhileItLasts(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 0 {
		t.Fatalf("AdmitAge of nothing stored: %v, %v; want 0", a, err)
	}
	if err := StoreAdmitAge(ctx, c, "h", "o~1", 160*time.Millisecond+time.Microsecond, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := StoreAdmitAge(ctx, c, "h", "o~1", 60*time.Millisecond, time.Minute); err != nil {
		t.Fatal(err)
	}
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 161*time.Millisecond {
		t.Fatalf("AdmitAge: %v, %v; want 161ms (160ms and 1µs, rounded up), the largest", a, err)
	}
	if ttl := c.PTTL(ctx, AdmitAgeKey("h")).Val(); ttl < 50*time.Second {
		t.Fatalf("the set expires in %v; want the longest member's minute", ttl)
	}
	time.Sleep(400 * time.Millisecond)
	if err := StoreAdmitAge(ctx, c, "h", "o~2", 30*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 60*time.Millisecond {
		t.Fatalf("AdmitAge after the 161ms member ended: %v, %v; want 60ms", a, err)
	}
	if n := c.ZCard(ctx, AdmitAgeKey("h")).Val(); n != 2 {
		t.Fatalf("the set holds %d members; want 2, the ended one removed", n)
	}
	if ttl := c.PTTL(ctx, AdmitAgeKey("h")).Val(); ttl < 50*time.Second {
		t.Fatalf("the set expires in %v after a shorter store; want the minute it had", ttl)
	}
}
