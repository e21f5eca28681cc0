package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

func TestEngineOrderPerKeyAcrossInstances(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	j := newJournal()
	h := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		ev := seqKey(e.Client, e.Seq)
		j.enter(e.Client, ev)
		time.Sleep(time.Millisecond) // widen the window an overlap would need
		j.leave(e.Client, ev, e.Seq, true)
		return nil
	})
	startEngine(t, c, fastOptions("p1"), h)
	startEngine(t, c, fastOptions("p2"), h)
	p := NewPublisher(c, PublisherOptions{})
	keys := []string{"a", "b", "c", "d"}
	const n = 30
	for i := 1; i <= n; i++ {
		for _, k := range keys {
			if err := p.Publish(ctx, ev(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range keys {
		eventually(t, 20*time.Second, "key "+k+" applied", func() bool { return j.count(k) >= n })
		if got := j.seqs(k); !inOrder(got, n) {
			t.Errorf("key %s applied %v, want 1..%d in order", k, got, n)
		}
	}
	if len(j.overlap) > 0 {
		t.Fatalf("same-key events overlapped: %v", j.overlap)
	}
}

func TestEngineHaltOnPoisonOtherPartitionsFlow(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var attempts atomic.Int32
	var mu sync.Mutex
	applied := map[string][]int{}
	h := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		if e.Poison {
			attempts.Add(1)
			if e.Seq%2 == 0 {
				panic("poison panics")
			}
			return errPoison
		}
		mu.Lock()
		applied[e.Client] = append(applied[e.Client], e.Seq)
		mu.Unlock()
		return nil
	})
	halts := make(chan Halt, 4)
	opts := fastOptions("p1")
	opts.Retry.MaxRetries = 2
	opts.OnHalt = func(h Halt) { halts <- h }
	r := startEngine(t, c, opts, h)
	p := NewPublisher(c, PublisherOptions{})
	for i := 1; i <= 5; i++ {
		a := ev("a", i)
		a.Poison = i == 2
		for _, m := range []*testEvent{a, ev("b", i)} {
			if err := p.Publish(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	var halt Halt
	select {
	case halt = <-halts:
	case <-time.After(20 * time.Second):
		t.Fatal("no halt reported")
	}
	if halt.Key != "a" || halt.Stream != "order:{a}" || !errors.Is(halt.Err, ErrHandlerPanic) {
		t.Fatalf("halt %+v", halt)
	}
	if n := attempts.Load(); n != 3 {
		t.Fatalf("poison tried %d times, want 1 + MaxRetries = 3", n)
	}
	eventually(t, 20*time.Second, "key b drained", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(applied["b"]) == 5
	})
	mu.Lock()
	gotA := fmt.Sprint(applied["a"])
	mu.Unlock()
	if gotA != "[1]" {
		t.Fatalf("key a applied %s past its poison head, want [1]", gotA)
	}
	pend := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: "order:{a}", Group: laneGroup(t, c, "order:{a}", "orders"), Start: "-", End: "+", Count: 10}).Val()
	// Entries behind the head may be pending too: read ahead, never run.
	if len(pend) == 0 || pend[0].ID != halt.EntryID {
		t.Fatalf("pending %+v, want the poison head %s first", pend, halt.EntryID)
	}
	if c.Exists(ctx, "order:{a}:dlq").Val() != 0 {
		t.Fatal("poison moved to a DLQ")
	}
	st := r.Status()
	if hs := st.Halted(); len(hs) != 1 || hs[0].Key != "a" || hs[0].Halt == nil {
		t.Fatalf("status halted %+v", hs)
	}
}

func TestEngineHaltsOnBadEntries(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var mu sync.Mutex
	var seen []string
	h := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		mu.Lock()
		seen = append(seen, seqKey(e.Client, e.Seq))
		mu.Unlock()
		return nil
	})
	halts := make(chan Halt, 4)
	opts := fastOptions("p1")
	opts.OnHalt = func(h Halt) {
		halts <- h
		panic("a broken alert callback must not crash the engine")
	}
	// Another handler's type on the same category is skipped, not a halt.
	shipped := keyedHandler("shipping", func(context.Context, *testEvent) error { return nil })
	shipped.Routes[0].Type = "testShipped"
	startEngine(t, c, opts, h, shipped)
	c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.PartitionStream("order", "z"), Values: []any{rdb.FieldType, "testShipped", rdb.FieldPayload, "{}"}})
	c.SAdd(ctx, rdb.IndexKey("order"), "z")
	tests := []struct {
		key, typ, payload, reason string
	}{
		{"x", "testEvent", "{not json", "undecodable payload"},
		{"y", "Unknown", "{}", "unknown message type"},
	}
	for _, tt := range tests {
		c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.PartitionStream("order", tt.key), Values: []any{rdb.FieldType, tt.typ, rdb.FieldPayload, tt.payload}})
		c.SAdd(ctx, rdb.IndexKey("order"), tt.key)
	}
	p := NewPublisher(c, PublisherOptions{})
	p.Publish(ctx, ev("x", 2))
	p.Publish(ctx, ev("z", 1))
	got := map[string]string{}
	for len(got) < len(tests) { // y halts in both handlers
		select {
		case h := <-halts:
			got[h.Key] = h.Reason
		case <-time.After(20 * time.Second):
			t.Fatalf("halts so far %v", got)
		}
	}
	for _, tt := range tests {
		if got[tt.key] != tt.reason {
			t.Errorf("key %s halted with %q, want %q", tt.key, got[tt.key], tt.reason)
		}
	}
	eventually(t, 10*time.Second, "key z applied", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 1 && seen[0] == "z/1"
	})
}

func TestEngineReclaimsDeadOwnersPendingFirst(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	for i := 1; i <= 4; i++ {
		p.Publish(ctx, ev("a", i))
	}
	// A dead owner took entry 1 and never acked it.
	stream := rdb.PartitionStream("order", "a")
	dead, err := rdb.Acquire(ctx, c, rdb.PartitionLease(stream, "orders"), "dead", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Reclaim(ctx, c, dead, "orders", []string{stream})
	if _, ok, err := rdb.FencedRead(ctx, c, dead, "orders", []string{stream}, nil); !ok || err != nil {
		t.Fatalf("dead owner read: %v %v", ok, err)
	}
	j := newJournal()
	var tokens sync.Map
	h := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		if li, ok := LeaseFromContext(ctx); ok {
			tokens.Store(li.Token, true)
		}
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	startEngine(t, c, fastOptions("p2"), h)
	eventually(t, 20*time.Second, "all applied", func() bool { return j.count("a") >= 4 })
	if got := j.seqs("a"); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("applied %v, want [1 2 3 4]", got)
	}
	var newer bool
	tokens.Range(func(k, _ any) bool {
		owner, gen, _ := rdb.ParseToken(k.(string))
		newer = newer || owner == "p2" && gen > dead.Generation
		return true
	})
	if !newer {
		t.Fatalf("handler did not run under a p2 token above the dead owner's generation %d", dead.Generation)
	}
	for _, cons := range c.XInfoConsumers(ctx, stream, laneGroup(t, c, stream, "orders")).Val() {
		if cons.Name == dead.Token() {
			t.Fatal("dead owner's consumer was not deleted after reclaim")
		}
	}
	if err := rdb.FencedAck(ctx, c, dead, "orders", stream, "0-1"); !errors.Is(err, ErrFenced) {
		t.Fatalf("dead owner's ack: %v, want ErrFenced", err)
	}
}

// A dead owner left two backfill entries pending (in flight, read ahead)
// and the partition stream has new entries: its successor runs the two
// before anything newer, though they are on the later lane. Its reads
// skip the pending pass (plain commands on the generation's group) only
// once a read found nothing pending: one that did not would run the new
// entries first, as a plain read looks at the stream alone.
func TestEngineTakeoverRunsPendingBackfillFirst(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	p.Publish(ctx, ev("a", 100), AsBackfill())
	p.Publish(ctx, ev("a", 101), AsBackfill())
	stream := rdb.PartitionStream("order", "a")
	fill := rdb.BackfillStream("order", "a", DefaultBackfillSuffix)
	dead, err := rdb.Acquire(ctx, c, rdb.PartitionLease(stream, "orders"), "dead", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	c.XGroupCreate(ctx, fill, "orders", "0")
	if es := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: dead.Token(), Streams: []string{fill, ">"}, Count: 2, Block: -1}).Val(); len(es) != 1 || len(es[0].Messages) != 2 {
		t.Fatalf("the dead owner's read of the backfill lane: %v", es)
	}
	for i := 1; i <= 3; i++ {
		p.Publish(ctx, ev("a", i))
	}
	j := newJournal()
	startEngine(t, c, fastOptions("p2"), keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		j.leave2(e.Client, e.Seq)
		return nil
	}))
	eventually(t, 20*time.Second, "all applied", func() bool { return j.count("a") >= 5 })
	if got := fmt.Sprint(j.seqs("a")); got != "[100 101 1 2 3]" {
		t.Fatalf("applied %s, want the pending backfill entries first: [100 101 1 2 3]", got)
	}
}

func TestEngineLostLeaseCancelsHandlerAndFences(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	entered := make(chan struct{}, 1)
	cause := make(chan error, 1)
	h := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		entered <- struct{}{}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	r := startEngine(t, c, fastOptions("p1"), h)
	NewPublisher(c, PublisherOptions{}).Publish(ctx, ev("a", 1))
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("handler never ran")
	}
	staleToken := r.Status().Partitions[0].Token
	// Another owner takes the partition (as after a stall past the TTL).
	ref := rdb.PartitionLease("order:{a}", "orders")
	c.Del(ctx, ref.Key)
	if _, err := rdb.Acquire(ctx, c, ref, "thief", time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("handler context cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("handler context not cancelled after the lease was lost")
	}
	eventually(t, 10*time.Second, "stale owner to abandon", func() bool { return len(r.Status().Partitions) == 0 })
	pend := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: "order:{a}", Group: laneGroup(t, c, "order:{a}", "orders"), Start: "-", End: "+", Count: 10}).Val()
	if len(pend) != 1 || pend[0].Consumer != staleToken {
		t.Fatalf("pending %+v: the stale owner must not have acked", pend)
	}
}

func TestEngineGracefulStopReleases(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	j := newJournal()
	h := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		j.leave2(e.Client, e.Seq)
		return nil
	})
	r := startEngine(t, c, fastOptions("p1"), h)
	p := NewPublisher(c, PublisherOptions{})
	p.Publish(ctx, ev("a", 1))
	p.Publish(ctx, ev("b", 1))
	eventually(t, 20*time.Second, "both applied", func() bool { return j.count("a") == 1 && j.count("b") == 1 })
	first := map[string]int64{}
	for _, ps := range r.Status().Partitions {
		first[ps.Stream] = ps.Generation
	}
	r.stop()
	for _, k := range []string{"a", "b"} {
		if c.Exists(ctx, rdb.PartitionLease(rdb.PartitionStream("order", k), "orders").Key).Val() != 0 {
			t.Errorf("lease of %s not released", k)
		}
	}
	if n := c.ZCard(ctx, rdb.MembersKey("orders")).Val(); n != 0 {
		t.Errorf("members set still has %d members", n)
	}
	// The next instance takes over at once, at the next generation.
	r2 := startEngine(t, c, fastOptions("p2"), h)
	p.Publish(ctx, ev("a", 2))
	eventually(t, 20*time.Second, "a/2 applied", func() bool { return j.count("a") == 2 })
	for _, ps := range r2.Status().Partitions {
		if ps.Generation <= first[ps.Stream] {
			t.Errorf("partition %s at generation %d, want above the first owner's %d", ps.Stream, ps.Generation, first[ps.Stream])
		}
	}
}

func (j *journal) leave2(key string, seq int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.applied[key] = append(j.applied[key], seq)
}

func TestEngineBackfillAfterPrimary(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	p.Publish(ctx, ev("a", 100), AsBackfill())
	p.Publish(ctx, ev("a", 1))
	p.Publish(ctx, ev("a", 2))
	j := newJournal()
	startEngine(t, c, fastOptions("p1"), keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		j.leave2(e.Client, e.Seq)
		return nil
	}))
	eventually(t, 20*time.Second, "all applied", func() bool { return j.count("a") == 3 })
	if got := fmt.Sprint(j.seqs("a")); got != "[1 2 100]" {
		t.Fatalf("applied %s, want primary then backfill [1 2 100]", got)
	}
}

func TestEngineSlowHandlerKeepsLease(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	opts := fastOptions("p1")
	opts.LeaseTTL, opts.HeartbeatInterval = 300*time.Millisecond, 50*time.Millisecond
	release := make(chan struct{})
	results := make(chan error, 1)
	var sawExpiry atomic.Bool
	h := keyedHandler("orders", func(hctx context.Context, e *testEvent) error {
		// Stay in the handler until the lease has been renewed past
		// several TTLs: its context must stay alive throughout.
		<-release
		if sawExpiry.Load() {
			results <- errors.New("lease key expired while the handler ran")
		} else {
			results <- hctx.Err()
		}
		return nil
	})
	r := startEngine(t, c, opts, h)
	NewPublisher(c, PublisherOptions{}).Publish(ctx, ev("a", 1))
	key := rdb.PartitionLease("order:{a}", "orders").Key
	eventually(t, 20*time.Second, "lease taken", func() bool { return c.Exists(ctx, key).Val() == 1 })
	eventually(t, 20*time.Second, "partition owned", func() bool { return len(r.Status().Partitions) == 1 })
	held := r.Status().Partitions[0].Generation
	// Watch the lease across a few renewals: it must never lapse.
	var renewals int
	last := c.PTTL(ctx, key).Val()
	eventually(t, 20*time.Second, "several renewals", func() bool {
		ttl := c.PTTL(ctx, key).Val()
		if ttl < 0 {
			sawExpiry.Store(true)
			return true
		}
		if ttl > last {
			renewals++
		}
		last = ttl
		return renewals >= 6
	})
	close(release)
	if err := <-results; err != nil {
		t.Fatalf("slow handler: %v", err)
	}
	eventually(t, 10*time.Second, "acked", func() bool {
		return c.XPending(ctx, "order:{a}", laneGroup(t, c, "order:{a}", "orders")).Val().Count == 0
	})
	if ps := r.Status().Partitions; len(ps) != 1 || ps[0].Generation != held {
		t.Fatalf("partitions %+v, want still generation %d", ps, held)
	}
}

// A *redis.Ring is refused at NewEngine: a round of many partitions' calls
// would go to the shard of its first key only.
func TestNewEngineRefusesRing(t *testing.T) {
	r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer r.Close()
	if _, err := NewEngine(r, fastOptions("ring")); !errors.Is(err, ErrUnsupportedClient) {
		t.Fatalf("NewEngine with a Ring: %v, want ErrUnsupportedClient", err)
	}
}
