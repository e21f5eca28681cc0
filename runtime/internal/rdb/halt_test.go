package rdb

import (
	"errors"
	"testing"
)

// Only the lease holder records a halt: a stale owner's record is fenced.
func TestRecordHaltIsFenced(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stale := Lease{Ref: PartitionLease("order:x", "g"), Owner: "w1", Generation: 1}
	c.Set(ctx, stale.Ref.Key, "w2:2", 0)
	r := HaltRecord{Handler: "g", Partition: "order:x"}
	_, err := RecordHalt(ctx, c, stale, r)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("record by a stale owner: %v, want ErrFenced", err)
	}
	if n, _ := c.HExists(ctx, r.RecordKey(), MetaHalt).Result(); n {
		t.Fatal("stale owner wrote a halt record")
	}
}
