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

// A leader's pass renews its lease by time, not by count: over a slow link,
// 150 cold partitions take several LeaseTTLs to reap, and the pass reaps
// them all under one lease. Seen failing with a renewal every 100 checks
// (issue #41's soak: the lease lost 18 times, passes stopped early): the
// reaper lease of the category lapsed before the 100th check, the renewal failed, and the pass
// stopped with 50 partitions left ("reaper lost its lease; pass stopped").
func TestReaperRenewsByTime(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	const keys = 150
	for k := range keys {
		if err := c.SAdd(ctx, rdb.IndexKey("order"), fmt.Sprint("k", k)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slow := redis.NewClient(&redis.Options{Addr: c.Options().Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { slow.Close() })
	slow.AddHook(slowHook(5 * time.Millisecond))
	var logs logsink.Buffer
	cfg := testConfig(slow, "reaper", &logs)
	m := New(cfg)
	start := time.Now()
	if _, _, done := m.reapCategory(ctx, make(chan struct{}), rdb.ReapCategory{Category: "order", ReapAfter: cfg.ReapAfter, Backfill: []string{cfg.BackfillSuffix}}); !done {
		t.Fatalf("the pass stopped; logs:\n%s", logs.String())
	}
	if left, err := rdb.Partitions(ctx, c, "order"); err != nil || len(left) != 0 {
		t.Fatalf("after one pass of %v (LeaseTTL %v): %d of %d partitions left (%v); logs:\n%s", time.Since(start).Round(time.Millisecond), cfg.LeaseTTL, len(left), keys, err, logs.String())
	}
	if strings.Contains(logs.String(), "lost its lease") {
		t.Fatalf("the pass lost its lease:\n%s", logs.String())
	}
}
