package rdb

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// A sequential pm's applied mark names the last entry of a stream its
// state includes. Reaping a partition deletes its lanes, and a recreated
// lane's ids follow the server clock only, so they may fall below the old
// mark (a clock step-back, a failover to a server whose clock is behind):
// the reap must drop the marks of the lanes it deletes, in the same
// script, for every pm group that may read them (registered, or found on
// a lane), and keep the state itself and the marks of other streams. On a
// cluster the state keys share the partition's slot, so it is one script.
func TestReapDropsAppliedMarks(t *testing.T) {
	redistest.Topologies(t, reapDropsAppliedMarks)
}

func reapDropsAppliedMarks(t *testing.T, c redis.UniversalClient) {
	ctx := ctxT(t)
	stream, backfill := PartitionStream("order", "k"), BackfillStream("order", "k", DefaultBackfillSuffix)
	other := PartitionStream("payment", "k") // another category of the pm: not reaped here
	c.HSet(ctx, GroupsKey("order"), "flow", "0")
	handled(t, ctx, c, "k", backfill, "flow")
	handled(t, ctx, c, "k", stream, "flow")
	// A keyed handler (no pm state), registered after the trims, which
	// would keep what it has not read.
	c.HSet(ctx, GroupsKey("order"), "h", "0")
	if _, err := CreateGroup(ctx, c, stream, "h", false); err != nil {
		t.Fatal(err)
	}
	// A pm of another build, not registered: found on the stream.
	if _, err := CreateGroup(ctx, c, stream, "retired", false); err != nil {
		t.Fatal(err)
	}
	// Marks above any id the recreated lanes will get from the clock.
	const high = "99999999999999-0"
	for _, pm := range []string{"flow", "retired"} {
		if err := c.HSet(ctx, StateKey(pm, "k"), "version", "3", "data", `{"n":3}`,
			AppliedField(stream), high, AppliedField(backfill), high, AppliedField(other), "5-0").Err(); err != nil {
			t.Fatal(err)
		}
	}

	reaped, err := Reap(ctx, c, "order", "k", []string{DefaultBackfillSuffix}, []string{"flow", "h"}, 0)
	if err != nil || !reaped {
		t.Fatalf("Reap = %v, %v; want reaped", reaped, err)
	}
	for _, pm := range []string{"flow", "retired"} {
		vals, err := c.HMGet(ctx, StateKey(pm, "k"), "version", "data", AppliedField(stream), AppliedField(backfill), AppliedField(other)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if vals[0] != "3" || vals[1] != `{"n":3}` || vals[4] != "5-0" {
			t.Errorf("%s: the reap changed the state or another stream's mark: %v", pm, vals)
		}
		for i, lane := range []string{stream, backfill} {
			if v, _ := vals[2+i].(string); v != "" {
				t.Errorf("%s: the mark of reaped lane %s survived the reap: %q", pm, lane, v)
			}
			_, _, applied, err := LoadState(ctx, c, pm, "k", lane)
			if err != nil || applied != "" {
				t.Errorf("%s: LoadState of %s after the reap = applied %q, %v; want none", pm, lane, applied, err)
			}
		}
	}
	if n, _ := c.Exists(ctx, StateKey("h", "k")).Result(); n != 0 {
		t.Errorf("the reap created a state for group h, which has none")
	}

	// An owner that outlived its lease cannot write a mark of the old lane
	// after the reap: the save is fenced by the pm lease, which the reap
	// required to be free.
	_, _, err = SaveState(ctx, c, StateSave{PM: "flow", Correlation: "k", Data: []byte(`{"n":4}`), ExpectVersion: 3,
		LeaseKey: PMLeaseKey("flow", "k"), Token: "o:1", Stream: stream, EntryID: high})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("a save under a lost lease after the reap: %v, want ErrFenced", err)
	}
	if _, _, applied, _ := LoadState(ctx, c, "flow", "k", stream); applied != "" {
		t.Fatalf("a fenced save wrote the mark %q", applied)
	}

	// A pm state that never had a mark for the lanes gains none, and a
	// reap of lanes that are already gone touches nothing.
	c.SAdd(ctx, IndexKey("order"), "k")
	before, _ := c.HGetAll(ctx, StateKey("flow", "k")).Result()
	if reaped, err := Reap(ctx, c, "order", "k", []string{DefaultBackfillSuffix}, []string{"flow", "h"}, time.Hour); err != nil || !reaped {
		t.Fatalf("Reap of a partition without lanes = %v, %v; want reaped", reaped, err)
	}
	after, _ := c.HGetAll(ctx, StateKey("flow", "k")).Result()
	if len(after) != len(before) {
		t.Fatalf("state %v became %v", before, after)
	}
}
