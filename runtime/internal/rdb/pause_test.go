package rdb

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every confirmation an attempt can start under refuses on a paused
// partition, after doing the acks it carried; the lease stays held and
// nothing is read or marked.
func TestPauseMarkRefusesAttempts(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	rc, ids := roundPartition(ctx, t, c, "p", 3)
	l := roundLease(rc)
	// Deliver the first entry: it is the one in flight when the pause comes.
	if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: roundToken, Streams: []string{rc.lanes[0], ">"}, Count: 1, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, MetaKey(l.Ref.Key), MetaPaused, `{"by":"test"}`).Err(); err != nil {
		t.Fatal(err)
	}
	b := NewBatcher(c)
	pending := func() int64 { return c.XPending(ctx, rc.lanes[0], "g").Val().Count }
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Verify", func() error { return l.Verify(ctx, c) }},
		{"Batcher.Verify", func() error { return b.Verify(ctx, l) }},
		{"BeginAttempt", func() error { return l.BeginAttempt(ctx, c, time.Minute) }},
		{"FencedRead", func() error { _, _, err := FencedRead(ctx, c, l, "g", rc.lanes, nil); return err }},
		{"FencedReadOldest", func() error {
			_, _, err := FencedReadOldest(ctx, c, l, "g", rc.lanes, 1, nil)
			return err
		}},
		{"Batcher.ReadAhead", func() error { _, _, err := b.ReadAhead(ctx, l, "g", rc.lanes, 4, nil, ReadFlags{}); return err }},
		{"Batcher.ReadOldest", func() error { _, _, err := b.ReadOldest(ctx, l, "g", rc.lanes, 1, nil); return err }},
		{"Prefetch", func() error { _, _, err := b.ReadNew(l, "g", rc.lanes, 4, nil, nil, false).Wait(ctx); return err }},
	} {
		if err := tc.call(); !errors.Is(err, ErrPaused) {
			t.Errorf("%s on a paused partition: %v, want ErrPaused", tc.name, err)
		}
	}
	if n := pending(); n != 1 {
		t.Fatalf("%d entries pending after the paused calls, want the one in flight only (nothing read)", n)
	}
	if c.HExists(ctx, MetaKey(l.Ref.Key), MetaAttempt).Val() {
		t.Fatal("BeginAttempt marked an attempt on a paused partition")
	}
	// The in-flight entry's ack goes through, and still confirms nothing.
	if err := b.Ack(ctx, l, "g", rc.lanes[0], ids[0], false); !errors.Is(err, ErrPaused) {
		t.Fatalf("Ack on a paused partition: %v, want ErrPaused after the ack", err)
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d entries pending after the ack, want 0", n)
	}
	if tok := c.Get(ctx, l.Ref.Key).Val(); tok != l.Token() {
		t.Fatalf("the lease holds %q, want it still held (%s)", tok, l.Token())
	}
	// Resumed (the mark deleted), the next read returns the next entry.
	c.HDel(ctx, MetaKey(l.Ref.Key), MetaPaused)
	en, ok, err := FencedRead(ctx, c, l, "g", rc.lanes, nil)
	if err != nil || !ok || en.ID != ids[1] {
		t.Fatalf("the read after the pause ended: %v %v %v, want %s", en.ID, ok, err, ids[1])
	}
}

// The reaper keeps a partition paused for any group, however cold.
func TestReapKeepsAPausedPartition(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	for _, tc := range []struct {
		name   string
		mark   string // the control hash to pause, "" for none
		legacy string // a pause mark of the earlier layout to set, "" for none
		reaped bool
	}{
		{"paused", MetaKey(LeaseKey(PartitionStream("order", "k1"), "g")), "", false},
		{"a pm paused on the key", MetaKey(PMLeaseKey("g", "k1")), "", false},
		{"paused in the earlier layout", "", legacyPauseKey(LeaseKey(PartitionStream("order", "k1"), "g")), false},
		{"a pm paused in the earlier layout", "", legacyPauseKey(PMLeaseKey("g", "k1")), false},
		{"not paused", "", "", true},
	} {
		c.SAdd(ctx, IndexKey("order"), "k1")
		if tc.mark != "" {
			c.HSet(ctx, tc.mark, MetaPaused, "{}")
		}
		if tc.legacy != "" {
			c.Set(ctx, tc.legacy, "{}", 0)
		}
		reaped, err := Reap(ctx, c, "order", "k1", []string{"backfill"}, []string{"g"}, time.Millisecond)
		if err != nil || reaped != tc.reaped {
			t.Errorf("%s: reaped %v, %v; want %v", tc.name, reaped, err, tc.reaped)
		}
		if tc.mark != "" && !c.HExists(ctx, tc.mark, MetaPaused).Val() {
			t.Errorf("%s: the pause is gone", tc.name)
		}
		if tc.legacy != "" && c.Exists(ctx, tc.legacy).Val() != 1 {
			t.Errorf("%s: the pause mark is gone", tc.name)
		}
		c.Del(ctx, tc.mark, tc.legacy)
	}
}

// A cold partition's owner keeps a paused one: release_cold refuses while
// the pause mark exists (the partition stays owned, as a pause promises),
// and lets it go once the mark is gone.
func TestReleaseColdKeepsAPausedPartition(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := PartitionStream("order", "k1")
	c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"n", 1}})
	c.XTrimMaxLen(ctx, stream, 0)
	last := c.XInfoStream(ctx, stream).Val().LastGeneratedID
	eventually(t, 5*time.Second, "the Redis clock to pass the last entry", func() bool {
		return c.Time(ctx).Val().UnixMilli() > idMillis(last)+1
	})
	l, err := Acquire(ctx, c, PartitionLease(stream, "g"), "o~1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.HSet(ctx, MetaKey(l.Ref.Key), MetaPaused, `{"by":"test"}`)
	if released, err := l.ReleaseCold(ctx, c, time.Millisecond, []string{stream}); err != nil || released {
		t.Fatalf("ReleaseCold of a paused partition = %v, %v; want kept", released, err)
	}
	if tok := c.Get(ctx, l.Ref.Key).Val(); tok != l.Token() {
		t.Fatalf("the lease holds %q, want it still held (%s)", tok, l.Token())
	}
	c.HDel(ctx, MetaKey(l.Ref.Key), MetaPaused)
	if released, err := l.ReleaseCold(ctx, c, time.Millisecond, []string{stream}); err != nil || !released {
		t.Fatalf("ReleaseCold once resumed = %v, %v; want released", released, err)
	}
}
