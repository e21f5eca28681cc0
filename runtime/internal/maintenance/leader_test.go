package maintenance

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Two instances cannot both lead: while one holds the maintenance lease
// the other's hold says false; once the first has stalled past its term
// and the second took the lease, the first one's renewal is refused (the
// generation fences it) and it stops leading.
func TestOneLeader(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var logs1, logs2 logsink.Buffer
	cfg1, cfg2 := testConfig(c, "m1", &logs1), testConfig(c, "m2", &logs2)
	cfg1.LeaseTTL, cfg2.LeaseTTL = 300*time.Millisecond, 300*time.Millisecond
	m1, m2 := New(cfg1), New(cfg2)
	if !m1.hold(ctx) {
		t.Fatalf("the first instance does not lead; logs:\n%s", logs1.String())
	}
	if m2.hold(ctx) {
		t.Fatal("the second instance leads beside the first")
	}
	// m1 stalls (no renewal) until its lease expires; m2 takes it.
	eventually(t, 5*time.Second, "m1's lease expired", func() bool {
		return c.Exists(ctx, rdb.MaintenanceLease().Key).Val() == 0
	})
	if !m2.hold(ctx) {
		t.Fatalf("the second instance does not lead after the first's lease expired; logs:\n%s", logs2.String())
	}
	if m1.hold(ctx) {
		t.Fatal("the stalled leader still leads beside the new one")
	}
	if m1.leading() || m1.stats.losses.Load() != 1 || !strings.Contains(logs1.String(), "lost its lease") {
		t.Fatalf("the stalled leader: leading %v, %d losses; logs:\n%s", m1.leading(), m1.stats.losses.Load(), logs1.String())
	}
	if v := c.Get(ctx, rdb.MaintenanceLease().Key).Val(); !strings.HasPrefix(v, "m2~test:") {
		t.Fatalf("the lease holds %q, want m2's token", v)
	}
	m1.release(ctx) // releases nothing: it holds nothing
	if !m2.hold(ctx) || c.Exists(ctx, rdb.MaintenanceLease().Key).Val() != 1 {
		t.Fatal("the stale leader's release ended the new leader's lease")
	}
}

// A leader that loses its lease in the middle of a pass (it stalled past
// its term, and another instance leads now) reaps nothing more: the pass
// stops before its next partition.
func TestLeaderLossStopsPass(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	const keys, stallAt = 20, 5
	for k := range keys {
		c.SAdd(ctx, rdb.IndexKey("order"), fmt.Sprintf("k%02d", k)) // indexed, never appended to: cold
	}
	var logs1, logs2 logsink.Buffer
	cfg1, cfg2 := testConfig(c, "m1", &logs1), testConfig(c, "m2", &logs2)
	cfg1.LeaseTTL, cfg2.LeaseTTL = 300*time.Millisecond, time.Minute
	m1, m2 := New(cfg1), New(cfg2)
	seen := 0
	m1.beforeReap = func(string) {
		if seen++; seen != stallAt {
			return
		}
		// m1 stalls here (a GC pause, a stopped VM) past its lease's term.
		eventually(t, 5*time.Second, "m1's lease expired", func() bool {
			return c.Exists(ctx, rdb.MaintenanceLease().Key).Val() == 0
		})
		if !m2.hold(ctx) {
			t.Errorf("m2 could not lead; logs:\n%s", logs2.String())
		}
	}
	_, reaped, done := m1.reapCategory(ctx, make(chan struct{}), rdb.ReapCategory{Category: "order", ReapAfter: time.Millisecond, Backfill: []string{rdb.DefaultBackfillSuffix}})
	if done || reaped != stallAt-1 {
		t.Fatalf("the pass went on after the loss: done %v, reaped %d, want %d; logs:\n%s", done, reaped, stallAt-1, logs1.String())
	}
	if left, _ := rdb.Partitions(ctx, c, "order"); len(left) != keys-(stallAt-1) {
		t.Fatalf("%d partitions left, want %d", len(left), keys-(stallAt-1))
	}
}

// Engines announce their categories; one leads and reaps them all,
// including the categories it does not read itself (with the other
// engine's backfill lanes: a partition whose lane of another suffix holds
// an entry is kept); the other never passes. When the leader stops it releases the lease, and the other
// takes over. A pass also gives the counter of an older release's reaper
// lease a TTL.
func TestLeaderReapsEveryCategory(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	seed := func(cat string, n int) {
		for k := range n {
			c.SAdd(ctx, rdb.IndexKey(cat), fmt.Sprint("k", k))
		}
	}
	seed("a", 5)
	seed("b", 5)
	c.SAdd(ctx, rdb.IndexKey("b"), "kept")
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.BackfillStream("b", "kept", "bf"), Values: []any{"n", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "{a}:__reapergen__", "7", 0).Err(); err != nil { // left by an older release
		t.Fatal(err)
	}
	var logs1, logs2 logsink.Buffer
	cfg1, cfg2 := testConfig(c, "m1", &logs1), testConfig(c, "m2", &logs2)
	cfg1.LeaseTTL, cfg2.LeaseTTL = 600*time.Millisecond, 600*time.Millisecond
	cfg2.BackfillSuffix = "bf"
	m1, m2 := New(cfg1), New(cfg2)
	stop1, stop2 := make(chan struct{}), make(chan struct{})
	done1, done2 := make(chan struct{}), make(chan struct{})
	go func() { defer close(done1); m1.Run(ctx, stop1, []string{"a"}) }()
	eventually(t, 10*time.Second, "m1 leads", func() bool { return m1.stats.leads.Load() == 1 })
	go func() { defer close(done2); m2.Run(ctx, stop2, []string{"b"}) }()
	defer func() { close(stop2); <-done2 }()
	left := func(cat string) int { ks, _ := rdb.Partitions(ctx, c, cat); return len(ks) }
	eventually(t, 10*time.Second, "both categories reaped", func() bool {
		return left("a") == 0 && left("b") == 1 && m1.stats.passes.Load() >= 2
	})
	if ks, _ := rdb.Partitions(ctx, c, "b"); len(ks) != 1 || ks[0] != "kept" {
		t.Fatalf("category b keeps %v, want the partition whose bf lane holds an entry", ks)
	}
	if m2.stats.leads.Load() != 0 || m2.stats.passes.Load() != 0 {
		t.Fatalf("the second instance led %d times and passed %d times beside the leader", m2.stats.leads.Load(), m2.stats.passes.Load())
	}
	if pttl := c.PTTL(ctx, "{a}:__reapergen__").Val(); pttl <= 0 {
		t.Fatalf("the older release's counter has PTTL %v after a pass, want a TTL", pttl)
	}
	close(stop1)
	<-done1
	seed("a", 3)
	eventually(t, 10*time.Second, "m2 leads and reaps once m1 stopped", func() bool {
		return m2.stats.leads.Load() == 1 && left("a") == 0
	})
	if m1.stats.losses.Load() != 0 || m2.stats.losses.Load() != 0 {
		t.Fatalf("losses: %d, %d", m1.stats.losses.Load(), m2.stats.losses.Load())
	}
}

// A leader between passes keeps its lease: with passes minutes apart, it
// still renews by time, so after several lease terms it leads with the
// lease it took and has lost nothing.
func TestIdleLeaderKeepsItsLease(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var logs logsink.Buffer
	cfg := testConfig(c, "m1", &logs)
	cfg.LeaseTTL, cfg.ReapAfter = 300*time.Millisecond, time.Hour // a pass every 5 minutes
	m := New(cfg)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); m.Run(ctx, stop, []string{"order"}) }()
	eventually(t, 10*time.Second, "leading", func() bool { return m.stats.leads.Load() == 1 })
	token := c.Get(ctx, rdb.MaintenanceLease().Key).Val()
	eventually(t, 10*time.Second, "renewals over several terms", func() bool { return m.stats.renewals.Load() >= 6 })
	close(stop)
	<-done
	if m.stats.losses.Load() != 0 || m.stats.leads.Load() != 1 || m.stats.passes.Load() != 0 {
		t.Fatalf("losses %d, leads %d, passes %d; logs:\n%s", m.stats.losses.Load(), m.stats.leads.Load(), m.stats.passes.Load(), logs.String())
	}
	if !strings.HasPrefix(token, "m1~test:") {
		t.Fatalf("the lease held %q", token)
	}
	if c.Exists(ctx, rdb.MaintenanceLease().Key).Val() != 0 {
		t.Fatal("the lease was not released when Run returned")
	}
}
