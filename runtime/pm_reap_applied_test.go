package runtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A sequential pm's applied mark must not outlive the stream it refers
// to. The pm applies an event of o-1 (its state records the entry's id);
// the cold partition is reaped; then the server clock steps back an hour
// and the next event recreates the stream with an id from that clock,
// below the mark (simulated: the test appends the event with an explicit
// id an hour before the first one, as XADD * would). The pm must apply
// it, not ack it as an entry its state already includes.
func TestPMAppliesEventsOfAReapedStreamBelowTheOldMark(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	reg := flowPM("flow", func(context.Context, string, string, *pmPayment) error { return nil })
	stream := rdb.PartitionStream("pmorder", "o-1")
	p := NewPublisher(c)
	opts := fastOptions("a")
	opts.ReapAfter = 300 * time.Millisecond
	startEngine(t, c, opts, reg)

	if err := p.Publish(ctx, &pmOrder{OrderID: "o-1", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	var mark string
	eventually(t, 20*time.Second, "the first event applied", func() bool {
		_, _, mark, _ = rdb.LoadState(ctx, c, reg.Name, "o-1", stream)
		return mark != ""
	})
	eventually(t, 20*time.Second, "the partition reaped", func() bool {
		ks, err := rdb.Partitions(ctx, c, "pmorder")
		n, err2 := c.Exists(ctx, stream).Result()
		return err == nil && err2 == nil && len(ks) == 0 && n == 0
	})

	// The clock stepped back an hour: the recreated stream's first id.
	ms, err := strconv.ParseInt(strings.SplitN(mark, "-", 2)[0], 10, 64)
	if err != nil {
		t.Fatalf("mark %q: %v", mark, err)
	}
	low := fmt.Sprintf("%d-0", ms-time.Hour.Milliseconds())
	it, err := p.p.Prepare(ctx, &pmOrder{OrderID: "o-1", Seq: 2}, publishConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// What rdb.Publish does, with the id the stepped-back clock gives.
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: it.Stream, ID: low, Values: it.Fields}).Err(); err != nil {
		t.Fatal(err)
	}
	c.SAdd(ctx, rdb.IndexKey("pmorder"), "o-1")
	c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.SignalKey("pmorder"), Values: []any{"k", "o-1"}})

	eventually(t, 20*time.Second, "the second event acked", func() bool { return ackedAll(ctx, c, stream, reg.Name) })
	if f, _ := loadFlow(t, NewRedisStateStore(c), reg.Name, "o-1"); !slices.Equal(f.Orders, []int{1, 2}) {
		t.Fatalf("orders %v: entry %s of the recreated stream was acked without being applied (the reap left the mark %s)", f.Orders, low, mark)
	}
}

// ackedAll reports whether group has read every entry of stream (which
// exists) and has none pending.
func ackedAll(ctx context.Context, c *redis.Client, stream, group string) bool {
	info, err := c.XInfoStream(ctx, stream).Result()
	if err != nil {
		return false
	}
	groups, err := c.XInfoGroups(ctx, stream).Result()
	if err != nil {
		return false
	}
	g, ok := rdb.GroupOf(groups, group)
	return ok && g.Pending == 0 && g.LastDeliveredID == info.LastGeneratedID
}
