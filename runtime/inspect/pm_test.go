package inspect

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Inspect of a sequential pm's partition stream that is not halted
// reports the pm's lease on the correlation value ({value}:__pmlease__:pm)
// and the value's streams in every category the pm reads, not the keyed
// layout's lease key, which a pm never holds (issue #23). A keyed handler
// of the same stream keeps its own lease.
func TestInspectPMPartition(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		in := New(c)
		for _, r := range []struct{ cat, group string }{{"ord", "flow"}, {"pay", "flow"}, {"ord", "keyed"}, {"ord", "fresh"}} {
			if _, err := rdb.RegisterGroup(ctx, c, r.cat, r.group, false); err != nil {
				t.Fatal(err)
			}
		}
		ids := publish(t, c, "ord", "o-1", 2)
		publish(t, c, "pay", "o-1", 1)
		for _, s := range []string{"ord:{o-1}", "pay:{o-1}"} {
			if _, err := rdb.CreateGroup(ctx, c, s, "flow", false); err != nil {
				t.Fatal(err)
			}
		}
		// The pm's owner host:9 at generation 12 is running ord:{o-1}'s
		// first entry.
		if es, err := rdb.ReadGroup(ctx, c, "ord:{o-1}", "flow", "host:9:12", ">", 1, -1); err != nil || len(es) != 1 {
			t.Fatalf("read: %v, %v", es, err)
		}
		c.Set(ctx, rdb.PMLeaseKey("flow", "o-1"), "host:9:12", 30*time.Second)
		c.HSet(ctx, rdb.StateKey("flow", "o-1"), rdb.MetaGen, "12")

		wantLanes := []string{"ord:{o-1}", "pay:{o-1}", "ord:{o-1}:backfill", "pay:{o-1}:backfill"}
		for _, stream := range []string{"ord:{o-1}", "pay:{o-1}"} {
			got, err := in.Inspect(ctx, "flow", stream)
			if err != nil {
				t.Fatal(err)
			}
			var lanes []string
			for _, l := range got.Lanes {
				lanes = append(lanes, l.Stream)
			}
			if got.LeaseKey != "{o-1}:__pmlease__:flow" || got.Lease != "host:9:12" || got.LeaseTTL <= 0 || got.LeaseTTL > 30*time.Second {
				t.Errorf("inspect %s: lease %s held by %q (ttl %v); want the pm's lease {o-1}:__pmlease__:flow held by host:9:12", stream, got.LeaseKey, got.Lease, got.LeaseTTL)
			}
			if !got.PM || got.Partition != "o-1" || got.Halt != nil || !cmp.Equal(lanes, wantLanes) || got.Head == nil || got.Head.ID != ids[0] {
				t.Errorf("inspect %s: pm %v, partition %s, halt %v, lanes %v, head %+v; want the pm's value o-1, not halted, lanes %v, head %s",
					stream, got.PM, got.Partition, got.Halt, lanes, got.Head, wantLanes, ids[0])
			}
		}

		// Between owners the pm's lease is free: still the pm's key.
		c.Del(ctx, rdb.PMLeaseKey("flow", "o-1"))
		if got, err := in.Inspect(ctx, "flow", "ord:{o-1}"); err != nil || !got.PM || got.LeaseKey != "{o-1}:__pmlease__:flow" || got.Lease != "" {
			t.Errorf("inspect with the pm's lease free: pm %v, lease %s %q, %v", got.PM, got.LeaseKey, got.Lease, err)
		}
		// A keyed handler of the stream, and one that never leased it.
		c.Set(ctx, rdb.LeaseKey("ord:{o-1}", "keyed"), "w:3", 30*time.Second)
		for handler, lease := range map[string]string{"keyed": "w:3", "fresh": ""} {
			got, err := in.Inspect(ctx, handler, "ord:{o-1}")
			if err != nil || got.PM || got.LeaseKey != rdb.LeaseKey("ord:{o-1}", handler) || got.Lease != lease || len(got.Lanes) != 2 {
				t.Errorf("inspect of keyed handler %s: pm %v, lease %s %q, %d lanes, %v; want its keyed lease", handler, got.PM, got.LeaseKey, got.Lease, len(got.Lanes), err)
			}
		}

		// Halted on ord:{o-1}'s entry: inspecting pay:{o-1}, another
		// stream of the value, shows the halt too.
		r := rdb.HaltRecord{Handler: "flow", PM: true, Partition: "o-1", Category: "ord", Key: "o-1", Stream: "ord:{o-1}",
			Streams: wantLanes, EntryID: ids[0], Reason: "failed", Owner: "host:9", Token: "host:9:12",
			LeaseKey: rdb.PMLeaseKey("flow", "o-1"), At: time.Unix(1, 0).UTC()}
		b, _ := json.Marshal(r)
		c.HSet(ctx, r.RecordKey(), rdb.MetaHalt, string(b))
		rdb.Index(ctx, c, "flow", r.RecordKey())
		got, err := in.Inspect(ctx, "flow", "pay:{o-1}")
		if err != nil || got.Halt == nil || got.Halt.EntryID != ids[0] || !got.PM || got.Partition != "o-1" {
			t.Fatalf("inspect pay:{o-1} of the pm halted on ord:{o-1}: %+v, %v", got, err)
		}
		if err := in.CheckPartition(ctx, "flow", "pay:{o-1}"); err != nil {
			t.Fatalf("CheckPartition: %v", err)
		}
	})
}
