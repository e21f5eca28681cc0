package runtime

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A category above PartitionWarnThreshold is warned about when it crosses
// it (again after it fell below), and shows in Status while above.
func TestLargeCategoryWarning(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var logs syncBuffer
	opts := fastOptions("w1")
	opts.PartitionWarnThreshold = 2
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := startEngine(t, c, opts, keyedHandler("orders", func(context.Context, *testEvent) error { return nil }))
	warnings := func() int { return strings.Count(logs.String(), "category has many partitions") }
	p := NewPublisher(c)
	for _, k := range []string{"a", "b", "c"} {
		if err := p.Publish(ctx, ev(k, 1)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "order shown as large", func() bool { return r.Status().LargeCategories["order"] == 3 })
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings after crossing the threshold, want 1", n)
	}
	c.SRem(ctx, rdb.IndexKey("order"), "b", "c")
	eventually(t, 10*time.Second, "order back under the threshold", func() bool { return r.Status().LargeCategories == nil })
	c.SAdd(ctx, rdb.IndexKey("order"), "b", "c")
	eventually(t, 10*time.Second, "a second warning on the second crossing", func() bool { return warnings() == 2 })
}
