package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// commandCalls is how many times Redis ran cmd (inside scripts too) since
// the last CONFIG RESETSTAT.
func commandCalls(t *testing.T, c *redis.Client, cmd string) int64 {
	t.Helper()
	stats, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// Discovery reads a category's index again only when it may have changed:
// idle cycles read nothing, and a key published for the first time (its
// signal names a key the kept index lacks) is read and claimed at once.
func TestDiscoveryReadsTheIndexOnlyOnChange(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	if err := p.Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	applied := make(chan string, 10)
	opts := fastOptions("p1")
	opts.LeaseTTL = 20 * time.Second // the index is read again every 2 x LeaseTTL regardless
	r := startEngine(t, c, opts, keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		applied <- e.Client
		return nil
	}))
	eventually(t, 20*time.Second, "p1 owns a", func() bool { return owned(r)[0] == 1 })
	<-applied
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Each discovery cycle announces the instance (member.lua runs one
	// ZREMRANGEBYSCORE): twenty cycles without a change.
	eventually(t, 20*time.Second, "twenty discovery cycles", func() bool { return commandCalls(t, c, "zremrangebyscore") >= 20 })
	if n := commandCalls(t, c, "sunion"); n != 0 {
		t.Fatalf("idle discovery read the index %d times in twenty cycles, want 0", n)
	}
	if err := p.Publish(ctx, ev("b", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the new key claimed and applied", func() bool { return owned(r)[0] == 2 })
	if got := <-applied; got != "b" {
		t.Fatalf("applied %s, want b", got)
	}
	if n := commandCalls(t, c, "sunion"); n == 0 {
		t.Fatal("the new key was claimed without reading the index: the test does not test what it says")
	}
}

// With every partition owned, the check for unowned partitions sums the
// instances' recorded counts instead of looking at each partition
// (owner_state.lua, the only script running PTTL, never runs); a partition
// nobody can own is still found and reported.
func TestUnownedCheckSkipsOwnedPartitions(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	const parts = 20
	for i := range parts {
		if err := p.Publish(ctx, ev(fmt.Sprint("k", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	h := keyedHandler("orders", func(context.Context, *testEvent) error { return nil })
	faults := make(chan Fault, 16)
	var rs []*running
	for _, owner := range []string{"e1", "e2"} {
		opts := fastOptions(owner)
		opts.OnFault = func(f Fault) { faults <- f }
		rs = append(rs, startEngine(t, c, opts, h))
	}
	eventually(t, 20*time.Second, "all owned", func() bool { o := owned(rs...); return o[0]+o[1] == parts })
	// Let a heartbeat record the counts (HeartbeatInterval 150ms), then
	// watch three check periods (LeaseTTL 1s; a discovery cycle is 50ms).
	// Wait for the counts to cover every partition, then for a check on
	// each instance after that, which forgets the partitions marked while
	// they were still free during the start.
	eventually(t, 20*time.Second, "the counts recorded", func() bool {
		sum, complete, err := rdb.OwnedByOthers(ctx, c, "orders", "", map[string]bool{"e1": true, "e2": true})
		return err == nil && complete && sum == int64(parts)
	})
	recorded := time.Now()
	eventually(t, 20*time.Second, "a check on each instance since", func() bool {
		for _, r := range rs {
			marks, at := r.maint.Checked("orders")
			if marks > 0 || !at.After(recorded) {
				return false
			}
		}
		return true
	})
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "three check periods", func() bool { return commandCalls(t, c, "zremrangebyscore") >= 2*3*20+10 })
	if n := commandCalls(t, c, "pttl"); n != 0 {
		t.Fatalf("the unowned check looked at partitions %d times with all of them owned, want 0", n)
	}
	// A partition no one can own: its generation key holds garbage.
	if err := c.HSet(ctx, rdb.MetaKey(rdb.LeaseKey(rdb.PartitionStream("order", "bad"), "orders")), rdb.MetaGen, "not-a-number").Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, ev("bad", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-faults:
		if f.Kind != FaultUnowned || f.Key != "bad" {
			t.Fatalf("fault %+v, want the unowned partition bad", f)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the partition nobody owns was not reported")
	}
}

// An idle partition keeps no goroutine: 300 owned, idle partitions add a
// handful of goroutines to the process, not 300; a publish wakes the one
// it is for, and a graceful stop releases the sleeping ones.
func TestIdlePartitionsHaveNoGoroutine(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	const parts = 300
	var msgs []Message
	for i := range parts {
		msgs = append(msgs, ev(fmt.Sprint("k", i), 1))
	}
	if err := p.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	base := goruntime.NumGoroutine()
	applied := make(chan string, parts+1)
	r := startEngine(t, c, fastOptions("p1"), keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		applied <- fmt.Sprint(e.Client, "/", e.Seq)
		return nil
	}))
	for range parts {
		<-applied
	}
	eventually(t, 20*time.Second, "all owned and asleep", func() bool {
		return owned(r)[0] == parts && goruntime.NumGoroutine()-base < 50
	})
	if err := p.Publish(ctx, ev("k7", 2)); err != nil {
		t.Fatal(err)
	}
	if got := <-applied; got != "k7/2" {
		t.Fatalf("applied %s, want k7/2", got)
	}
	r.stop()
	keys, _ := c.Keys(ctx, "order:*:__lease__:*").Result()
	leases := slices.DeleteFunc(keys, func(k string) bool { return strings.HasSuffix(k, ":__meta__") }) // their control hashes stay
	if len(leases) != 0 {
		t.Fatalf("%d leases left after a graceful stop, want 0", len(leases))
	}
}
