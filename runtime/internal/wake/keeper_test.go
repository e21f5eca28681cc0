package wake

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Keep wakes a category's idle partitions once (a gap) when signals meant
// for them may have been missed: the instance's own stream was gone, or a
// fanout marker was lost. Run's first Keep creates both and wakes nobody.
func TestKeeperGapsWhenSignalsMayBeMissed(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	w := New(Config{Client: c, Block: 100 * time.Millisecond})
	if err := w.Watch(ctx, "order"); err != nil {
		t.Fatal(err)
	}
	k := NewKeeper(KeeperConfig{Client: c, Waiter: w, Incarnation: "a~1",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Interval: time.Second,
		LeaseTTL: time.Second, Fanout: []string{"order"}})
	k.Keep(ctx, true)
	if n := c.Exists(ctx, rdb.OwnerSignalKey("a~1"), rdb.FanoutKey("order")).Val(); n != 2 {
		t.Fatalf("the first Keep made %d of the stream and the marker, want both", n)
	}
	if g := w.Stats("order", "").Gap; g != 0 {
		t.Fatalf("the first Keep woke the category (gap at %d)", g)
	}
	k.Keep(ctx, false)
	if g := w.Stats("order", "").Gap; g != 0 {
		t.Fatalf("a heartbeat that found everything kept woke the category (gap at %d)", g)
	}

	c.Del(ctx, rdb.FanoutKey("order"))
	k.Keep(ctx, false)
	before := w.Stats("order", "").Gap
	if before == 0 {
		t.Fatal("a lost fanout marker woke nobody")
	}
	if n := c.Exists(ctx, rdb.FanoutKey("order")).Val(); n != 1 {
		t.Fatal("Keep did not set the lost marker again")
	}

	c.Del(ctx, rdb.OwnerSignalKey("a~1"))
	k.Keep(ctx, false)
	after := w.Stats("order", "").Gap
	if after <= before {
		t.Fatal("a lost signal stream woke nobody")
	}
	if n := c.Exists(ctx, rdb.OwnerSignalKey("a~1")).Val(); n != 1 {
		t.Fatal("Keep did not make the lost stream again")
	}
}
