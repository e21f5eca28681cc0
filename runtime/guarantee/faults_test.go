package guarantee

import (
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// TestProcessKillingMessageStops: a message that kills every process that
// handles it (Crash) takes down MaxDeliveries owners at most; the next
// owner halts the partition without running it, and survives. The events
// before it are applied, none after it.
func TestProcessKillingMessageStops(t *testing.T) {
	c := newCluster(t, ttl)
	c.maxDeliveries = 2
	ids := []string{"i1", "i2", "i3"}
	for _, id := range ids {
		c.start(id)
	}
	a := steps("client-A", 1, 4)
	a[1].Crash = true
	c.publish(a...)
	halt := rdb.MetaKey(rdb.LeaseKey(rdb.PartitionStream(Category, "client-A"), group))
	var r rdb.HaltRecord
	c.eventually(30*time.Second, "client-A halted without running its crashing event", func() bool {
		var found bool
		r, _, found, _ = rdb.GetHalt(c.ctx, c.rdb, halt)
		return found
	})
	if r.Reason != "delivered too many times" {
		t.Errorf("halt reason %q, want delivered too many times (record %+v)", r.Reason, r)
	}
	dead := 0
	for _, id := range ids {
		select {
		case <-c.proc(id).done:
			dead++
		default:
		}
	}
	if dead != 2 {
		t.Errorf("%d instances died on the message, want MaxDeliveries = 2", dead)
	}
	if got := c.appliedSeqs("client-A"); len(got) != 1 || got[0] != 1 {
		t.Errorf("client-A applied %v, want [1]: nothing after the halted event", got)
	}
}
