package rdb

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// Engines announce the categories they want reaped; the list holds each
// category once, with the largest ReapAfter and every backfill suffix
// announced for it, drops what no engine announced within the TTL, and
// ends with the last announcement. Members not written by AnnounceReap
// are skipped.
func TestAnnounceReap(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	const ttl = 400 * time.Millisecond
	bf := []string{DefaultBackfillSuffix}
	if _, err := AnnounceReap(ctx, c, []ReapCategory{{"order", time.Minute, bf}, {"pay", time.Hour, bf}}, ttl); err != nil {
		t.Fatal(err)
	}
	c.ZAdd(ctx, ReapCategoriesKey, redis.Z{Score: float64(time.Now().UnixMilli()), Member: "garbage"}, redis.Z{Score: float64(time.Now().UnixMilli()), Member: `{"c":"x","a":1}`})
	got, err := AnnounceReap(ctx, c, []ReapCategory{{"order", time.Hour, []string{"bf"}}, {"ship", time.Second, bf}}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	want := []ReapCategory{{"order", time.Hour, []string{"backfill", "bf"}}, {"pay", time.Hour, bf}, {"ship", time.Second, bf}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("categories (-want +got):\n%s", diff)
	}
	if pttl := c.PTTL(ctx, ReapCategoriesKey).Val(); pttl <= 0 || pttl > ttl {
		t.Fatalf("the set's PTTL is %v, want within (0, %v]", pttl, ttl)
	}
	// "ship" is announced again after half the TTL; the rest age out.
	time.Sleep(ttl / 2)
	if _, err := AnnounceReap(ctx, c, []ReapCategory{{"ship", time.Second, bf}}, ttl); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl/2 + 50*time.Millisecond)
	got, err = AnnounceReap(ctx, c, nil, ttl) // only lists
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ReapCategory{{"ship", time.Second, bf}}, got); diff != "" {
		t.Fatalf("after the others aged out (-want +got):\n%s", diff)
	}
	if n := c.ZCard(ctx, ReapCategoriesKey).Val(); n != 1 {
		t.Fatalf("%d members left in the set, want 1: the aged ones are removed", n)
	}
	eventually(t, 5*time.Second, "the set expired", func() bool { return c.Exists(ctx, ReapCategoriesKey).Val() == 0 })
}

// An announcement Redis ran twice (its reply lost, go-redis sent it
// again) answers as one run does.
func TestAnnounceReapRunTwice(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lc, l := lossy(t, c, "reap_categories")
	got, err := AnnounceReap(ctx, lc, []ReapCategory{{"order", time.Minute, []string{DefaultBackfillSuffix}}}, time.Minute)
	if l.Lost() != 1 {
		t.Fatalf("lost %d replies, want 1", l.Lost())
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ReapCategory{{"order", time.Minute, []string{DefaultBackfillSuffix}}}, got); diff != "" {
		t.Fatalf("categories (-want +got):\n%s", diff)
	}
	if n := c.ZCard(ctx, ReapCategoriesKey).Val(); n != 1 {
		t.Fatalf("%d members, want 1", n)
	}
}

// The maintenance lease fences like a partition's: while one instance
// holds it another's acquire is refused, and once it has expired and
// another took it, the first one's renewal fails (its generation is
// older) and so does its release.
func TestMaintenanceLeaseFences(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ref := MaintenanceLease()
	a, err := Acquire(ctx, c, ref, "a~1", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(ctx, c, ref, "b~1", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("a second leader's acquire: %v, want ErrLeaseHeld", err)
	}
	eventually(t, 5*time.Second, "a's lease expired", func() bool { return c.Exists(ctx, ref.Key).Val() == 0 })
	b, err := Acquire(ctx, c, ref, "b~1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if b.Generation <= a.Generation {
		t.Fatalf("generation %d after %d", b.Generation, a.Generation)
	}
	if err := a.Renew(ctx, c, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the stale leader's renewal: %v, want ErrLeaseLost", err)
	}
	a.Release(ctx, c)
	if err := b.Renew(ctx, c, time.Minute); err != nil {
		t.Fatalf("the stale leader's release took the new one's lease: %v", err)
	}
	// Even a stale leader of the same incarnation (one that took the
	// lease again after losing it) holds an older generation.
	stale := b
	stale.Generation--
	if err := stale.Renew(ctx, c, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("an older generation's renewal: %v, want ErrLeaseLost", err)
	}
}

// EndLegacyReaper gives the counter of the per-category reaper lease of
// older releases a TTL; an older engine's acquire takes it away again,
// and the next call restores it.
func TestEndLegacyReaper(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	gen := legacyReaperGeneration("order")
	if gen != "{order}:__reapergen__" {
		t.Fatalf("legacy counter %q", gen)
	}
	if err := c.Set(ctx, gen, "5", 0).Err(); err != nil { // as an older engine's acquire does
		t.Fatal(err)
	}
	if pttl := c.PTTL(ctx, gen).Val(); pttl != -time.Nanosecond {
		t.Fatalf("an older engine's counter has PTTL %v, want none (-1)", pttl)
	}
	if err := EndLegacyReaper(ctx, c, "order", time.Minute); err != nil {
		t.Fatal(err)
	}
	if pttl := c.PTTL(ctx, gen).Val(); pttl <= 0 {
		t.Fatalf("after EndLegacyReaper the counter's PTTL is %v", pttl)
	}
	if err := EndLegacyReaper(ctx, c, "absent", time.Minute); err != nil {
		t.Fatalf("on a category without the counter: %v", err)
	}
}
