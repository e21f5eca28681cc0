package runtime

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// noteHandler is an unkeyed Registration on the unpartitioned "note".
func noteHandler(name string, fn func(ctx context.Context, n *testNote) error) Registration {
	return Registration{Name: name, Kind: EventHandler, Routes: []Route{{
		Category: "note", Type: "testNote",
		Decode: func(c Codec, b []byte) (any, error) {
			var n testNote
			return &n, c.Unmarshal(b, &n)
		},
		Invoke: func(ctx context.Context, _ any, m any) error { return fn(ctx, m.(*testNote)) },
	}}}
}

var noGroupStat = regexp.MustCompile(`errorstat_NOGROUP:count=(\d+)`)

// noGroupErrors is how many NOGROUP errors the server has replied.
func noGroupErrors(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := noGroupStat.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// pendingIdle returns the idle time of stream's only pending entry in
// group, and its consumer; ok false when nothing (or more) is pending.
func pendingIdle(c *redis.Client, stream, group string) (time.Duration, string, bool) {
	p, err := c.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 1 {
		return 0, "", false
	}
	return p[0].Idle, p[0].Consumer, true
}

// A partition's first backfill entry, published while its unkeyed worker
// is idle, is read on its signal: the worker used to create the lane's
// group on NOGROUP and then wait for a signal already counted, until the
// 30 s safety net.
func TestUnkeyedFanFirstBackfillEntryIsRead(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	gate := make(chan struct{})
	var seen [3]atomic.Bool
	audit := Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("Client", func(_ context.Context, e *testEvent) error {
		if e.Seq == 1 {
			<-gate
		}
		seen[e.Seq].Store(true)
		return nil
	})}}
	opts := fastOptions("p1")
	// A long LeaseTTL keeps the dead-consumer check (and its timer) out
	// of the way: only the wake-up can deliver the entry in time.
	opts.LeaseTTL, opts.HeartbeatInterval = time.Minute, 150*time.Millisecond
	startEngine(t, c, opts, audit)
	p := NewPublisher(c)
	if err := p.Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the worker inside a/1", func() bool {
		idle, _, ok := pendingIdle(c, "order:{a}", "audit")
		return ok && idle >= 0
	})
	// While the handler holds a/1 the worker reads nothing; once released
	// it reads the backfill lane (NOGROUP: no such key) and goes idle.
	before := noGroupErrors(t, c)
	close(gate)
	eventually(t, 10*time.Second, "the worker's read of the empty backfill lane", func() bool {
		return seen[1].Load() && noGroupErrors(t, c) > before
	})
	if err := p.Publish(ctx, ev("a", 2), AsBackfill()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the first backfill entry a/2 (the safety net is 30 s)", func() bool { return seen[2].Load() })
}

// A poison message of an unkeyed handler stays pending on the instance
// that halted on it: it is alerted once, not re-run by that instance nor
// taken by another live one.
func TestUnkeyedPoisonAlertedOnce(t *testing.T) {
	t.Parallel()
	c, ctx := newRedis(t), ctxT(t)
	var calls, halts atomic.Int32
	h := noteHandler("notes", func(context.Context, *testNote) error { calls.Add(1); return errPoison })
	var engines []*running
	for _, owner := range []string{"p1", "p2"} {
		opts := fastOptions(owner)
		opts.Retry.MaxRetries = -1
		opts.OnHalt = func(Halt) { halts.Add(1) }
		engines = append(engines, startEngine(t, c, opts, h))
	}
	if err := NewPublisher(c).Publish(ctx, &testNote{Text: "x"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the halt", func() bool { return halts.Load() == 1 })
	// A re-run (by either instance) resets the entry's idle time; two
	// LeaseTTLs of idleness span several dead-consumer checks of both.
	eventually(t, 15*time.Second, "the halted entry left alone for 2 LeaseTTLs", func() bool {
		idle, _, ok := pendingIdle(c, "note", "notes")
		return ok && idle >= 2*time.Second
	})
	if n := calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1 (MaxRetries none)", n)
	}
	if n := halts.Load(); n != 1 {
		t.Errorf("OnHalt called %d times, want 1", n)
	}
	total := 0
	for _, e := range engines {
		total += len(e.Status().Halts)
	}
	if total != 1 {
		t.Errorf("Status().Halts lists %d halts across the instances, want 1", total)
	}
}

// A slow message of an unkeyed handler is not taken over by another
// instance while its own instance is live and still on it.
func TestUnkeyedSlowMessageNotClaimedFromLiveInstance(t *testing.T) {
	t.Parallel()
	c, ctx := newRedis(t), ctxT(t)
	release := make(chan struct{})
	var calls atomic.Int32
	h := noteHandler("notes", func(context.Context, *testNote) error {
		calls.Add(1)
		<-release
		return nil
	})
	startEngine(t, c, fastOptions("p1"), h)
	startEngine(t, c, fastOptions("p2"), h)
	if err := NewPublisher(c).Publish(ctx, &testNote{Text: "slow"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the in-flight entry idle for 2 LeaseTTLs", func() bool {
		idle, _, ok := pendingIdle(c, "note", "notes")
		return ok && idle >= 2*time.Second
	})
	if n := calls.Load(); n != 1 {
		t.Errorf("a live instance's slow message ran %d times, want 1", n)
	}
	close(release)
	eventually(t, 10*time.Second, "the ack", func() bool {
		p, err := c.XPending(ctx, "note", "notes").Result()
		return err == nil && p.Count == 0
	})
	if n := calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// An entry left pending by a consumer that is not live is claimed and
// handled, and the dead consumer is deleted from the group.
func TestUnkeyedDeadConsumerClaimedAndDeleted(t *testing.T) {
	t.Parallel()
	c, ctx := newRedis(t), ctxT(t)
	if err := c.XGroupCreateMkStream(ctx, "note", "notes", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := NewPublisher(c).Publish(ctx, &testNote{Text: "orphan"}); err != nil {
		t.Fatal(err)
	}
	if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "notes", Consumer: "ghost", Streams: []string{"note", ">"}, Count: 1, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	startEngine(t, c, fastOptions("p1"), noteHandler("notes", func(context.Context, *testNote) error { calls.Add(1); return nil }))
	eventually(t, 15*time.Second, "the orphan handled and the ghost consumer deleted", func() bool {
		cs, err := c.XInfoConsumers(ctx, "note", "notes").Result()
		if err != nil || calls.Load() == 0 {
			return false
		}
		for _, cn := range cs {
			if cn.Name == "ghost" {
				return false
			}
		}
		p, err := c.XPending(ctx, "note", "notes").Result()
		return err == nil && p.Count == 0
	})
	if n := calls.Load(); n != 1 {
		t.Errorf("orphan handled %d times, want 1", n)
	}
}

// Restarts (each a new OwnerID) leave no consumers behind in unkeyed
// groups, unpartitioned and partitioned, primary and backfill lanes.
func TestUnkeyedRestartsLeaveOnlyLiveConsumers(t *testing.T) {
	t.Parallel()
	c, ctx := newRedis(t), ctxT(t)
	var notes, events atomic.Int32
	regs := []Registration{
		noteHandler("notes", func(context.Context, *testNote) error { notes.Add(1); return nil }),
		{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("Client", func(context.Context, *testEvent) error { events.Add(1); return nil })}},
	}
	p := NewPublisher(c)
	for i := range 3 {
		r := startEngine(t, c, fastOptions(fmt.Sprintf("inc%d", i)), regs...)
		if err := errors.Join(p.Publish(ctx, &testNote{Text: "n"}), p.Publish(ctx, ev("a", i)), p.Publish(ctx, ev("a", 10+i), AsBackfill())); err != nil {
			t.Fatal(err)
		}
		want := int32(i + 1)
		eventually(t, 10*time.Second, "incarnation's messages", func() bool { return notes.Load() == want && events.Load() == 2*want })
		r.stop()
	}
	startEngine(t, c, fastOptions("inc3"), regs...)
	groups := [][2]string{{"note", "notes"}, {"order:{a}", "audit"}, {"order:{a}:" + DefaultBackfillSuffix, "audit"}}
	eventually(t, 15*time.Second, "only the live consumer in each group", func() bool {
		for _, g := range groups {
			cs, err := c.XInfoConsumers(ctx, g[0], g[1]).Result()
			if err != nil {
				return false
			}
			for _, cn := range cs {
				if cn.Name != "inc3" {
					return false
				}
			}
		}
		return true
	})
}

var wrongTypeStat = regexp.MustCompile(`errorstat_WRONGTYPE:count=(\d+)`)

// A failed read of a partition lane is retried after a backoff, not left
// to a signal: here the backfill lane is unreadable (a string), then is
// repaired and gets an entry without any signal.
func TestUnkeyedFanFailedReadIsRetried(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var seen [3]atomic.Bool
	audit := Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("Client", func(_ context.Context, e *testEvent) error {
		seen[e.Seq].Store(true)
		return nil
	})}}
	lane := "order:{a}:" + DefaultBackfillSuffix
	if err := c.Set(ctx, lane, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	wrongType := func() int {
		info, err := c.Info(ctx, "errorstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		m := wrongTypeStat.FindStringSubmatch(info)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	opts := fastOptions("p1")
	opts.LeaseTTL, opts.HeartbeatInterval = time.Minute, 150*time.Millisecond // no claim timer
	startEngine(t, c, opts, audit)
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a/1", func() bool { return seen[1].Load() })
	before := wrongType()
	eventually(t, 10*time.Second, "a failed read of the backfill lane after a/1", func() bool { return wrongType() > before })
	// Repair the lane behind the publisher's back: no signal is sent.
	if err := c.Del(ctx, lane).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: lane, Values: map[string]any{
		rdb.FieldType: "testEvent", rdb.FieldID: "m2", rdb.FieldPayload: `{"client":"a","seq":2}`}}).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a/2 read on a retry (the safety net is 30 s)", func() bool { return seen[2].Load() })
}

// An entry left pending on the instance's own consumer without a halt (an
// ack that failed after the handler succeeded) is re-run by that instance
// once LeaseTTL idle, and is not taken by another live instance.
func TestUnkeyedOwnUnackedEntryIsRerun(t *testing.T) {
	t.Parallel()
	c, ctx := newRedis(t), ctxT(t)
	var calls atomic.Int32
	var by [2]atomic.Int32
	for i, owner := range []string{"p1", "p2"} {
		startEngine(t, c, fastOptions(owner), noteHandler("notes", func(ctx context.Context, _ *testNote) error {
			calls.Add(1)
			by[i].Add(1)
			return nil
		}))
	}
	eventually(t, 10*time.Second, "the group", func() bool {
		cs, err := c.XInfoConsumers(ctx, "note", "notes").Result()
		return err == nil && len(cs) == 2
	})
	// Stand in for p1's failed ack: the entry is delivered to p1's
	// consumer, in one transaction with its append so no engine reads it
	// first, without its handler running.
	_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "note", Values: map[string]any{
			rdb.FieldType: "testNote", rdb.FieldID: "m1", rdb.FieldPayload: `{"text":"unacked"}`}})
		pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "notes", Consumer: "p1", Streams: []string{"note", ">"}, Count: 1, Block: -1})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the entry handled and acked", func() bool {
		p, err := c.XPending(ctx, "note", "notes").Result()
		return err == nil && p.Count == 0 && calls.Load() > 0
	})
	if calls.Load() != 1 || by[0].Load() != 1 {
		t.Errorf("handled %d times, by p1 %d times; want once, by p1", calls.Load(), by[0].Load())
	}
}
