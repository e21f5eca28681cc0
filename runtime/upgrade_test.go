package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// An engine of this release reads what the earlier release (key layout 1,
// docs/upgrading.md) left, written here in its formats and key names: a
// halted partition (its record and the halted index) stays halted,
// Status and inspect show it and a skip resolves it; a paused partition
// and a paused handler stay paused until resumed; other keys go on; and
// the old keys are gone once moved.
func TestUpgradeMigratesLayout1(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c)
	for _, e := range []*testEvent{ev("x", 1), ev("x", 2), ev("p", 1), ev("y", 1)} {
		if err := p.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// x's head, delivered to the earlier release's owner, halted there.
	x := rdb.PartitionStream("order", "x")
	head := deliverToEarlierOwner(t, c, x, "mig")
	rec, _ := json.Marshal(rdb.HaltRecord{Handler: "mig", Partition: x, Category: "order", Key: "x", Stream: x, Streams: []string{x},
		EntryID: head, Reason: "handler failed", Owner: "old", Token: "old~1:5", LeaseKey: rdb.LeaseKey(x, "mig"), At: time.Now().UTC()})
	old := map[string]string{
		"order:{x}:__halt__:mig":             string(rec),                                                          // the halt record
		"order:{x}:__gen__:mig":              "5",                                                                  // its generation counter
		"order:{p}:__lease__:mig:__paused__": `{"by":"alice","at":"2026-01-02T03:04:05Z","partition":"order:{p}"}`, // a partition's pause
		"seqby:__pause__:mig2":               `{"by":"bob","at":"2026-01-02T03:04:05Z"}`,                           // a handler's pause
	}
	for k, v := range old {
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.SAdd(ctx, "seqby:__halted__:mig", "order:{x}:__halt__:mig")
	c.SAdd(ctx, "seqby:__paused__:mig", "order:{p}:__lease__:mig:__paused__")

	var mu sync.Mutex
	ran := map[string][]string{}
	record := func(h string) func(context.Context, *testEvent) error {
		return func(_ context.Context, e *testEvent) error {
			if h == "mig" && e.Client == "x" && e.Seq == 1 {
				return errors.New("still failing")
			}
			mu.Lock()
			ran[h] = append(ran[h], seqKey(e.Client, e.Seq))
			mu.Unlock()
			return nil
		}
	}
	has := func(h, k string) bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(ran[h], k) }
	opts := fastOptions("new")
	opts.Retry.HaltedRetryInterval, opts.Retry.MaxRetries = 50*time.Millisecond, 1
	e := startEngine(t, c, opts, keyedHandler("mig", record("mig")), keyedHandler("mig2", record("mig2")))

	eventually(t, 20*time.Second, "y processed", func() bool { return has("mig", "y/1") })
	// Status shows what moved: x halted, p paused, mig2 paused whole.
	eventually(t, 20*time.Second, "Status to show the halt and the pauses", func() bool {
		st := e.Status()
		var halted, paused bool
		for _, ps := range st.Partitions {
			halted = halted || (ps.Handler == "mig" && ps.Stream == x && ps.Halted)
			paused = paused || (ps.Handler == "mig" && ps.Key == "p" && ps.Paused)
		}
		return halted && paused && slices.Contains(st.PausedHandlers, "mig2")
	})
	mu.Lock()
	if len(ran["mig2"]) != 0 || slices.Contains(ran["mig"], "p/1") || slices.Contains(ran["mig"], "x/2") {
		t.Fatalf("ran %v: want nothing of the paused handler mig2, of the paused partition p, nor after x's halted head", ran)
	}
	mu.Unlock()
	if n := c.Exists(ctx, "order:{x}:__halt__:mig", "order:{p}:__lease__:mig:__paused__", "seqby:__pause__:mig2",
		"seqby:__halted__:mig", "seqby:__paused__:mig").Val(); n != 0 {
		t.Errorf("%d of the earlier layout's keys left after Run", n)
	}
	in := inspect.New(c)
	hs, err := in.Halts(ctx, "mig")
	if err != nil || len(hs) != 1 || hs[0].Partition != x || hs[0].EntryID != head {
		t.Fatalf("Halts: %+v, %v; want x's head", hs, err)
	}
	ps, err := in.Paused(ctx, "")
	if err != nil || len(ps) != 2 {
		t.Fatalf("Paused: %+v, %v; want the partition p and the handler mig2", ps, err)
	}
	// Resolve x's head: once its new owner recorded its own halt, the
	// skip goes through, and x goes on.
	eventually(t, 20*time.Second, "the skip of x's head", func() bool {
		_, err := in.Skip(ctx, "mig", x, head)
		return err == nil
	})
	eventually(t, 20*time.Second, "x/2 processed", func() bool { return has("mig", "x/2") })
	if _, err := in.Resume(ctx, "mig", "order:{p}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "p/1 processed once resumed", func() bool { return has("mig", "p/1") })
	if _, err := in.ResumeHandler(ctx, "mig2"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "mig2 processed everything once resumed", func() bool {
		return has("mig2", "x/1") && has("mig2", "x/2") && has("mig2", "p/1") && has("mig2", "y/1")
	})
}

// A sequential pm's state of the earlier release (key layout 1) reads in
// this one: a value's saved state goes on from where it was, a paused
// value (its pause mark of the earlier layout) stays paused until resumed,
// and a halted value (its halt record) stays halted until skipped.
func TestUpgradeMigratesLayout1PM(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c)
	for _, m := range []Partitioned{&pmOrder{OrderID: "a", Seq: 2}, &pmOrder{OrderID: "h", Seq: 1}, &pmOrder{OrderID: "h", Seq: 2}, &pmOrder{OrderID: "y", Seq: 1}} {
		if err := p.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// h's head, delivered to the earlier release's owner, halted there.
	hs := rdb.PartitionStream("pmorder", "h")
	head := deliverToEarlierOwner(t, c, hs, "mf")
	rec, _ := json.Marshal(rdb.HaltRecord{Handler: "mf", PM: true, Partition: "h", Category: "pmorder", Key: "h", Stream: hs,
		Streams: []string{hs, rdb.PartitionStream("pmpayment", "h")}, EntryID: head, Reason: "handler failed", Owner: "old",
		Token: "old~1:5", LeaseKey: "{h}:__pmlease__:mf", At: time.Now().UTC()})
	for k, v := range map[string]string{
		"{h}:__pmhalt__:mf":             string(rec),
		"{h}:__pmgen__:mf":              "5",
		"{a}:__pmlease__:mf:__paused__": `{"by":"alice","at":"2026-01-02T03:04:05Z","partition":"a"}`,
	} {
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.SAdd(ctx, "seqby:__halted__:mf", "{h}:__pmhalt__:mf")
	c.SAdd(ctx, "seqby:__paused__:mf", "{a}:__pmlease__:mf:__paused__")
	// a's state as the earlier release saved it: order 1 applied.
	c.HSet(ctx, "{a}:__pmstate__:mf", "version", "1", "data", `{"orders":[1],"payments":null}`)

	var mu sync.Mutex
	var ran []string
	pm := flowPM("mf", func(_ context.Context, corr, event string, _ *pmPayment) error {
		if corr == "h" && event == "order/1" {
			return errors.New("still failing")
		}
		mu.Lock()
		ran = append(ran, corr+" "+event)
		mu.Unlock()
		return nil
	})
	has := func(s string) bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(ran, s) }
	opts := fastOptions("new")
	opts.Retry.HaltedRetryInterval, opts.Retry.MaxRetries = 50*time.Millisecond, 1
	e := startEngine(t, c, opts, pm)

	eventually(t, 20*time.Second, "y processed", func() bool { return has("y order/1") })
	eventually(t, 20*time.Second, "Status to show h halted and a paused", func() bool {
		var halted, paused bool
		for _, ps := range e.Status().Partitions {
			halted = halted || (ps.Key == "h" && ps.Halted)
			paused = paused || (ps.Key == "a" && ps.Paused)
		}
		return halted && paused
	})
	if has("a order/2") || has("h order/2") {
		t.Fatalf("ran %v: want nothing of the paused value a nor after h's halted head", ran)
	}
	if n := c.Exists(ctx, "{h}:__pmhalt__:mf", "{a}:__pmlease__:mf:__paused__", "seqby:__halted__:mf", "seqby:__paused__:mf").Val(); n != 0 {
		t.Errorf("%d of the earlier layout's keys left after Run", n)
	}
	in := inspect.New(c)
	eventually(t, 20*time.Second, "the skip of h's head", func() bool {
		_, err := in.Skip(ctx, "mf", "h", head)
		return err == nil
	})
	eventually(t, 20*time.Second, "h/2 processed", func() bool { return has("h order/2") })
	if _, err := in.Resume(ctx, "mf", "pmorder:{a}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a's order 2 once resumed", func() bool { return has("a order/2") })
	eventually(t, 20*time.Second, "a's state saved", func() bool {
		f, _ := loadFlow(t, e.o.StateStore, "mf", "a")
		return slices.Equal(f.Orders, []int{1, 2})
	})
}

// deliverToEarlierOwner creates group on stream and delivers its first
// entry to an earlier owner's consumer ("old~1:5"), as a halted head is
// left pending there; it returns the entry's id.
func deliverToEarlierOwner(t *testing.T, c redis.UniversalClient, stream, group string) string {
	t.Helper()
	ctx := ctxT(t)
	if err := c.XGroupCreate(ctx, stream, group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "old~1:5", Streams: []string{stream, ">"}, Count: 1, Block: -1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return got[0].Messages[0].ID
}
