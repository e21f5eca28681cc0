package rdb

import (
	"math"
	"strings"
	"testing"
	"time"
)

// append_once refuses a window that SET ... PX would refuse before it
// appends anything: an error reply after the XADD left the entry stored
// while the publish failed, so every retry stored it again.
func TestAppendOnceRefusesABadWindowBeforeWriting(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream, dedup := PartitionStream("order", "a"), DedupKey("order", "a", "m-1")
	for _, window := range []any{0, -1, "1.5", "abc", "", "1e3"} {
		err := scriptAppendOnce.Run(ctx, c, []string{stream, dedup}, window, "n", "1").Err()
		if err == nil || !strings.Contains(err.Error(), "dedup window") {
			t.Errorf("window %v: %v, want the script's refusal of the window", window, err)
		}
		if n := c.XLen(ctx, stream).Val(); n != 0 {
			t.Fatalf("window %v: %d entries stored by a refused append, want 0", window, n)
		}
		if c.Exists(ctx, dedup).Val() != 0 {
			t.Fatalf("window %v: the dedup key was written by a refused append", window)
		}
	}
	if err := scriptAppendOnce.Run(ctx, c, []string{stream, dedup}, 60000, "n", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if n := c.XLen(ctx, stream).Val(); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
}

// A window under a millisecond would be PX 0: Publish and PublishPlain
// count it as at least a millisecond (rounded up), so the publish
// succeeds and stores the entry once.
func TestPublishSubMillisecondWindow(t *testing.T) {
	for _, window := range []time.Duration{time.Nanosecond, 500 * time.Microsecond} {
		t.Run(window.String(), func(t *testing.T) {
			c, ctx := newRedis(t), ctxT(t)
			stream := PartitionStream("order", "a")
			once := Once{ID: "m-1", Window: window}
			if err := Publish(ctx, c, "order", "a", stream, 100, []any{"n", "1"}, once); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if n := c.XLen(ctx, stream).Val(); n != 1 {
				t.Fatalf("Publish: %d entries, want 1", n)
			}
			if err := PublishPlain(ctx, c, "note", []any{"n", "1"}, once); err != nil {
				t.Fatalf("PublishPlain: %v", err)
			}
			if n := c.XLen(ctx, "note").Val(); n != 1 {
				t.Fatalf("PublishPlain: %d entries, want 1", n)
			}
		})
	}
}

func TestWindowMillis(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{500 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + time.Nanosecond, 2},
		{24 * time.Hour, 86400000},
		{math.MaxInt64, math.MaxInt64/int64(time.Millisecond) + 1},
	} {
		if got := windowMillis(tt.d); got != tt.want {
			t.Errorf("windowMillis(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}
