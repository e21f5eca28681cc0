package rdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// handled publishes one entry to stream, reads it in group and acks it,
// then trims the stream: an idle, fully handled lane.
func handled(t *testing.T, ctx context.Context, c redis.UniversalClient, key, stream, group string) {
	t.Helper()
	if err := Publish(ctx, c, "order", key, stream, 100, []any{"n", "1"}, Once{}); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateGroup(ctx, c, stream, group, false); err != nil {
		t.Fatal(err)
	}
	ens, err := ReadGroup(ctx, c, stream, group, "o:1", ">", 10, -1)
	if err != nil || len(ens) != 1 {
		t.Fatalf("read %v, %v", ens, err)
	}
	if err := c.XAck(ctx, stream, group, ens[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := trimCategory(ctx, c, "order", stream); err != nil {
		t.Fatal(err)
	}
}

// Each reaper condition alone keeps the partition; a cold, unowned one
// loses its lanes, generations and halt record, but never its dead-letter
// stream nor a pm's state.
func TestReapConditions(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	stream, backfill := PartitionStream("order", "k"), BackfillStream("order", "k", DefaultBackfillSuffix)
	note := func(at, exp time.Time) {
		c.HSet(ctx, MetaKey(LeaseKey(stream, "h")), MetaResolved, fmt.Sprintf(`{"op":"x","at":%d,"exp":%d}`, at.UnixMilli(), exp.UnixMilli()))
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T)
		idle  time.Duration
		reap  bool
	}{
		{name: "cold and unowned", reap: true, setup: func(t *testing.T) {
			handled(t, ctx, c, "k", backfill, "h")
			handled(t, ctx, c, "k", stream, "h")
		}},
		{name: "indexed, never appended to", reap: true, setup: func(t *testing.T) {
			c.SAdd(ctx, IndexKey("order"), "k")
		}},
		{name: "entry on the stream", setup: func(t *testing.T) {
			Publish(ctx, c, "order", "k", stream, 100, []any{"n", "1"}, Once{})
		}},
		{name: "entry on the backfill lane", setup: func(t *testing.T) {
			handled(t, ctx, c, "k", stream, "h")
			Publish(ctx, c, "order", "k", backfill, 100, []any{"n", "1"}, Once{})
		}},
		{name: "pending entry trimmed away", setup: func(t *testing.T) {
			Publish(ctx, c, "order", "k", stream, 100, []any{"n", "1"}, Once{})
			CreateGroup(ctx, c, stream, "h", false)
			ReadGroup(ctx, c, stream, "h", "o:1", ">", 10, -1)
			c.XTrimMaxLen(ctx, stream, 0)
		}},
		{name: "partition lease held", setup: func(t *testing.T) {
			handled(t, ctx, c, "k", stream, "h")
			c.Set(ctx, LeaseKey(stream, "h"), "o:1", time.Minute)
		}},
		{name: "pm lease held", setup: func(t *testing.T) {
			handled(t, ctx, c, "k", stream, "h")
			c.Set(ctx, PMLeaseKey("h", "k"), "o:1", time.Minute)
		}},
		{name: "lease of a group not registered", setup: func(t *testing.T) {
			handled(t, ctx, c, "k", stream, "h")
			CreateGroup(ctx, c, stream, "retired", false)
			c.Set(ctx, LeaseKey(stream, "retired"), "o:1", time.Minute)
		}},
		// An operator's resolve counts as activity: the partition stays
		// until its note expires or the idle time has passed since the
		// resolve, whichever is first. No lane: cold however long the
		// idle time, so only the note can keep it.
		{name: "resolved within the idle time", idle: time.Hour, setup: func(t *testing.T) {
			now := c.Time(ctx).Val()
			note(now, now.Add(ResolvedTTL))
		}},
		{name: "resolved note expired", idle: time.Hour, reap: true, setup: func(t *testing.T) {
			now := c.Time(ctx).Val()
			note(now.Add(-20*time.Minute), now.Add(-10*time.Minute))
		}},
		{name: "resolved longer ago than the idle time", idle: time.Second, reap: true, setup: func(t *testing.T) {
			now := c.Time(ctx).Val()
			note(now.Add(-2*time.Second), now.Add(8*time.Minute))
		}},
		// A generation counter that is not seqby's digits is no generation:
		// it does not keep the partition.
		{name: "corrupt generation", reap: true, setup: func(t *testing.T) {
			c.HSet(ctx, MetaKey(LeaseKey(stream, "h")), MetaGen, "inf")
		}},
		{name: "not idle long enough", idle: time.Hour, setup: func(t *testing.T) {
			handled(t, ctx, c, "k", stream, "h")
		}},
		{name: "a lease acquired within the idle time", idle: time.Hour, setup: func(t *testing.T) {
			// No lane (cold however long the idle time), but the last
			// acquire was now: its generation must not go yet.
			now := c.Time(ctx).Val()
			c.HSet(ctx, StateKey("h", "k"), MetaGen, now.UnixMicro())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.FlushAll(ctx)
			c.HSet(ctx, GroupsKey("order"), "h", "0")
			tc.setup(t)
			c.SAdd(ctx, IndexKey("order"), "k")
			meta := MetaKey(LeaseKey(stream, "h"))
			c.HSetNX(ctx, meta, MetaGen, "7")
			c.HSetNX(ctx, StateKey("h", "k"), MetaGen, "7")
			c.HSet(ctx, meta, MetaHalt, "{}")
			// The earlier layout's keys of the partition go too.
			c.SetNX(ctx, legacyGenerationKey(stream, "h"), "7", 0)
			c.SetNX(ctx, legacyPMGenerationKey("h", "k"), "7", 0)
			c.Set(ctx, legacyHaltKey(stream, "h"), "{}", 0)
			c.XAdd(ctx, &redis.XAddArgs{Stream: DLQStream("order", "k"), Values: []any{"n", "1"}})
			c.HSet(ctx, StateKey("h", "k"), "version", "1")
			c.HSetNX(ctx, WakeKey(stream), "h", "dead~1")
			before, _ := c.XLen(ctx, stream).Result()

			reaped, err := Reap(ctx, c, "order", "k", []string{DefaultBackfillSuffix}, []string{"h"}, tc.idle)
			if err != nil || reaped != tc.reap {
				t.Fatalf("Reap = %v, %v; want %v", reaped, err, tc.reap)
			}
			keys, _ := Partitions(ctx, c, "order")
			if n, _ := c.Exists(ctx, DLQStream("order", "k"), StateKey("h", "k")).Result(); n != 2 {
				t.Errorf("the dead-letter stream or the pm state went")
			}
			if !tc.reap {
				after, _ := c.XLen(ctx, stream).Result()
				if len(keys) != 1 || after != before {
					t.Errorf("kept partition changed: index %v, %d entries (was %d)", keys, after, before)
				}
				return
			}
			if len(keys) != 0 {
				t.Errorf("index after reap: %v", keys)
			}
			gone := []string{stream, backfill, MetaKey(LeaseKey(stream, "h")), WakeKey(stream),
				legacyGenerationKey(stream, "h"), legacyPMGenerationKey("h", "k"), legacyHaltKey(stream, "h")}
			if n, _ := c.Exists(ctx, gone...).Result(); n != 0 {
				t.Errorf("%d of %v left after reap", n, gone)
			}
			if c.HExists(ctx, StateKey("h", "k"), MetaGen).Val() {
				t.Errorf("the pm's generation is left in its state after reap")
			}
		})
	}
}

// A reaper left in the middle (its key in the reaping set) is settled by
// the next: the key goes back to the index when its stream exists, and
// stays visible to discovery meanwhile.
func TestSettleReaping(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	c.SAdd(ctx, ReapingKey("order"), "live", "gone")
	c.XAdd(ctx, &redis.XAddArgs{Stream: PartitionStream("order", "live"), Values: []any{"n", "1"}})
	keys, _ := Partitions(ctx, c, "order")
	if len(keys) != 2 {
		t.Fatalf("partitions while reaping: %v", keys)
	}
	if n, err := SettleReaping(ctx, c, "order", []string{DefaultBackfillSuffix}); n != 2 || err != nil {
		t.Fatalf("SettleReaping = %d, %v", n, err)
	}
	index, _ := c.SMembers(ctx, IndexKey("order")).Result()
	reaping, _ := c.SMembers(ctx, ReapingKey("order")).Result()
	if len(index) != 1 || index[0] != "live" || len(reaping) != 0 {
		t.Fatalf("index %v, reaping %v", index, reaping)
	}
}

// Publishers and two reapers run at once on many keys while a consumer
// that finds partitions only through the index drains them: every entry
// is found, however publishes and reaps interleave. The reapers reap as
// soon as a partition is empty (idle 0), the harshest setting.
func TestReapRacesPublish(t *testing.T) {
	redistest.Topologies(t, reapRace)
}

func reapRace(t *testing.T, c redis.UniversalClient) {
	ctx := ctxT(t)
	const publishers, each, keys, reapers = 4, 250, 32, 2
	var seen sync.Map // entries the consumer found, marked before it removes them
	indexed := func(key string) bool {
		ks, err := Partitions(ctx, c, "order")
		if err != nil {
			t.Error(err)
		}
		for _, k := range ks {
			if k == key {
				return true
			}
		}
		return false
	}
	// indexedSoon reports whether key is indexed, or entry n was found,
	// within a few seconds (polling a condition with a deadline).
	indexedSoon := func(key, n string) bool {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if _, ok := seen.Load(n); ok || indexed(key) {
				return true
			}
		}
		return false
	}
	var wg sync.WaitGroup
	var stranded atomic.Int64
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("k%d", rand.N(keys))
				n := fmt.Sprintf("%d-%d", p, i)
				if err := Publish(ctx, c, "order", key, PartitionStream("order", key), 1000, []any{"n", n}, Once{}); err != nil {
					t.Error(err)
					return
				}
				// Once Publish returned, the entry is either found already
				// or findable: its key is indexed. (The index is read first:
				// the reaper removes the key only after the consumer has
				// marked the entry.) With two reapers the key may be out of
				// both sets for a round trip: one reaper's settle took it
				// out of the reaping set just before the other's moved it
				// there, and the other's settle, which looks at the lanes
				// after, puts it back. So it must be indexed within that
				// reaper's next calls, not at once.
				if !indexedSoon(key, n) {
					stranded.Add(1)
					t.Errorf("entry %s on %s: Publish returned, but the key is not indexed", n, key)
				}
				// Jitter, so partitions go empty and get reaped between
				// publishes (not a synchronisation).
				time.Sleep(time.Duration(rand.N(300)) * time.Microsecond)
			}
		}()
	}
	stop := make(chan struct{})
	var reaped atomic.Int64
	var bg sync.WaitGroup
	bg.Add(1 + reapers)
	for range reapers { // two at once: no step may rest on being the only reaper
		go func() {
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ks, _ := Partitions(ctx, c, "order")
				for _, k := range ks {
					if ok, err := Reap(ctx, c, "order", k, []string{DefaultBackfillSuffix}, nil, 0); err != nil {
						t.Error(err)
					} else if ok {
						reaped.Add(1)
					}
				}
			}
		}()
	}
	found := atomic.Int64{}
	consume := func() { // handles and removes what it finds through the index
		ks, err := Partitions(ctx, c, "order")
		if err != nil {
			t.Error(err)
			return
		}
		for _, k := range ks {
			s := PartitionStream("order", k)
			ens, err := c.XRange(ctx, s, "-", "+").Result()
			if err != nil {
				t.Error(err)
				return
			}
			for _, en := range ens {
				if _, dup := seen.LoadOrStore(en.Values["n"].(string), true); !dup {
					found.Add(1)
				}
				c.XDel(ctx, s, en.ID)
			}
		}
	}
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				consume()
			}
		}
	}()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for found.Load() < publishers*each && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	close(stop)
	bg.Wait()
	if got := found.Load(); got != publishers*each || stranded.Load() > 0 {
		t.Fatalf("found %d of %d entries through the index; %d publishes left their key unindexed (reaps: %d)",
			got, publishers*each, stranded.Load(), reaped.Load())
	}
	if reaped.Load() == 0 {
		t.Fatal("the reaper never reaped: the race was not exercised")
	}
	t.Logf("%d entries, %d reaps", publishers*each, reaped.Load())
}

// existsHook runs then once, right after the first EXISTS a client sent
// has its reply.
type existsHook struct {
	done atomic.Bool
	then func()
}

func (h *existsHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *existsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "exists" && h.done.CompareAndSwap(false, true) {
			h.then()
		}
		return err
	}
}
func (h *existsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Two reapers at once: reaper A finds the partition's lanes gone, then a
// publish recreates the stream and indexes the key, and reaper B moves
// the key to the reaping set and dies before it settles. A, taking the
// key out of the reaping set, must look at the lanes again: the key may
// never be in neither set while an entry waits on its stream (discovery
// would not find it until the key is published to again).
func TestSettleBesideAnotherReaper(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := PartitionStream("order", "k")
	c.SAdd(ctx, IndexKey("order"), "k") // indexed, never appended to: cold
	a := redis.NewClient(&redis.Options{Addr: c.Options().Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { a.Close() })
	a.AddHook(&existsHook{then: func() {
		if err := Publish(ctx, c, "order", "k", stream, 100, []any{"n", "1"}, Once{}); err != nil {
			t.Error(err)
		}
		if err := c.SMove(ctx, IndexKey("order"), ReapingKey("order"), "k").Err(); err != nil { // B's step 2; B dies
			t.Error(err)
		}
	}})
	reaped, err := Reap(ctx, a, "order", "k", []string{DefaultBackfillSuffix}, nil, 0)
	if err != nil || !reaped {
		t.Fatalf("Reap = %v, %v", reaped, err)
	}
	if n := c.XLen(ctx, stream).Val(); n != 1 {
		t.Fatalf("the stream holds %d entries, want the one published", n)
	}
	keys, err := Partitions(ctx, c, "order")
	if err != nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("partitions %v (%v): the key with an entry is in neither the index nor the reaping set", keys, err)
	}
}

// A partition is reaped with every backfill lane the engines reading its
// category use: one whose lane of another engine's suffix holds an entry
// is kept, though its stream and default lane are cold.
func TestReapEveryBackfillLane(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	c.SAdd(ctx, IndexKey("order"), "k")
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: BackfillStream("order", "k", "bf"), Values: []any{"n", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	reaped, err := Reap(ctx, c, "order", "k", []string{DefaultBackfillSuffix, "bf"}, nil, 0)
	if err != nil || reaped {
		t.Fatalf("Reap = %v, %v; want kept", reaped, err)
	}
	if n := c.XLen(ctx, BackfillStream("order", "k", "bf")).Val(); n != 1 {
		t.Fatalf("the bf lane holds %d entries", n)
	}
}
