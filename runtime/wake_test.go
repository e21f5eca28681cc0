package runtime

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// signalsRead is how many signals the engine's waiter has counted.
func signalsRead(r *running) uint64 {
	r.wake.mu.Lock()
	defer r.wake.mu.Unlock()
	return r.wake.total
}

// A publish wakes the instance that owns the partition and no other: an
// instance owning none of the key's partitions reads nothing for it. On
// the code before owner-directed wake-ups every instance read every
// publish's signal, and b counted 20 here.
func TestWakeUpsGoToTheOwner(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	var mu sync.Mutex
	applied := map[string]int{}
	h := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		mu.Lock()
		applied[e.Client]++
		mu.Unlock()
		return nil
	})
	count := func(k string) int { mu.Lock(); defer mu.Unlock(); return applied[k] }
	a := startEngine(t, c, fastOptions("a"), h)
	b := startEngine(t, c, fastOptions("b"), h)
	const keys = 8
	for i := range keys {
		if err := p.Publish(ctx, ev(fmt.Sprintf("k%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "each instance to own half the partitions", func() bool {
		o := owned(a, b)
		return o[0] == keys/2 && o[1] == keys/2
	})
	var key, token string
	for _, part := range a.Status().Partitions {
		key = part.Key
	}
	lease := rdb.LeaseKey(rdb.PartitionStream("order", key), "orders")
	token = c.Get(ctx, lease).Val()
	eventually(t, 20*time.Second, "the first event of "+key, func() bool { return count(key) == 1 })

	aBefore, bBefore := signalsRead(a), signalsRead(b)
	const n = 20
	for i := 2; i <= n+1; i++ {
		if err := p.Publish(ctx, ev(key, i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "the events of "+key, func() bool { return count(key) == n+1 })
	if got := c.Get(ctx, lease).Val(); got != token {
		t.Fatalf("%s changed hands during the test (%s, then %s): the test does not test what it says", key, token, got)
	}
	if got := signalsRead(b) - bBefore; got != 0 {
		t.Errorf("b, owning no partition of %s, read %d signals for its %d publishes, want 0", key, got, n)
	}
	if signalsRead(a) == aBefore {
		t.Errorf("a, the owner, read no signal: its partition was woken by something else")
	}
}

// An unkeyed handler reads every partition on every instance, so an
// instance running one is woken for every publish to its category, even
// one whose partition another instance owns for a keyed handler (that
// owner alone is named in the partition's wake hash). Without the fanout
// marker the only consumer of the unkeyed handler here slept until its
// 30 s safety-net re-read (seen failing at event 3 with the marker left
// unset).
func TestUnkeyedHandlerWakesForOwnedPartitions(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	keyed, err := tryStart(t, c, fastOptions("keyed"), keyedHandler("orders", func(context.Context, *testEvent) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan int, 10)
	fan := fastOptions("fan")
	fan.LeaseTTL = time.Minute // a fan worker also re-reads at each check for dead consumers, every LeaseTTL
	_, err = tryStart(t, c, fan, Registration{Name: "audit", Kind: EventHandler,
		Routes: []Route{orderRoute("Client", func(_ context.Context, e *testEvent) error {
			seen <- e.Seq
			return nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the keyed instance to own a", func() bool { return owned(keyed)[0] == 1 })
	select {
	case <-seen:
	case <-time.After(20 * time.Second):
		t.Fatal("the unkeyed handler did not see the first event")
	}
	owner := c.HGet(ctx, rdb.WakeKey(rdb.PartitionStream("order", "a")), "orders").Val()
	if owner == "" {
		t.Fatal("the keyed owner is not named in the wake hash: the test does not test what it says")
	}
	for i := 2; i <= 4; i++ {
		if err := p.Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-seen:
			if got != i {
				t.Fatalf("the unkeyed handler saw %d, want %d", got, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the unkeyed handler was not woken for event %d (its safety-net re-read is 30 s away)", i)
		}
	}
}

// An instance that found a partition cold skips it until a signal for its
// key, or 30 s: a publish to it must reach that instance even while
// another handler's owner, on another instance, is named in the
// partition's wake hash (the cold acquire names the group's want, "", so
// publishes signal every instance). Seen failing (the 10 s wait below)
// when the cold acquire named nothing.
func TestColdPartitionWakesBesideAnOwner(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	h2 := make(chan int, 10)
	x, err := tryStart(t, c, fastOptions("x"), keyedHandler("h1", func(context.Context, *testEvent) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	zo := fastOptions("z")
	zo.ReapAfter = 50 * time.Millisecond
	z, err := tryStart(t, c, zo, keyedHandler("h2", func(_ context.Context, e *testEvent) error {
		h2 <- e.Seq
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h2:
	case <-time.After(20 * time.Second):
		t.Fatal("h2 did not run the first event")
	}
	eventually(t, 20*time.Second, "z to let the cold partition go and find it cold", func() bool {
		z.mu.Lock()
		defer z.mu.Unlock()
		return len(z.cold) == 1
	})
	if owned(x)[0] != 1 || c.HGet(ctx, rdb.WakeKey(rdb.PartitionStream("order", "a")), "h1").Val() == "" {
		t.Fatal("x does not own a under h1: the test does not test what it says")
	}
	if err := p.Publish(ctx, ev("a", 2)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-h2:
		if got != 2 {
			t.Fatalf("h2 ran %d, want 2", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("h2 did not run the second event of its cold partition (its cold mark lasts 30 s)")
	}
}

// A fanout marker that lapsed or was lost is set again by the next
// heartbeat, and every idle fan worker of the category reads once:
// publishes meanwhile may have signalled the keyed owners alone. Seen
// failing when every set wrote the same value (the loss went unnoticed).
func TestFanoutMarkerLostWakesFans(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	r, err := tryStart(t, c, fastOptions("fan"), Registration{Name: "audit", Kind: EventHandler,
		Routes: []Route{orderRoute("Client", func(context.Context, *testEvent) error { return nil })}})
	if err != nil {
		t.Fatal(err)
	}
	gaps := func() uint64 {
		r.wake.mu.Lock()
		defer r.wake.mu.Unlock()
		return r.wake.gaps["order"]
	}
	if n := c.Exists(ctx, rdb.FanoutKey("order")).Val(); n != 1 {
		t.Fatal("no fanout marker while an unkeyed handler runs on a partitioned category")
	}
	before := gaps()
	c.Del(ctx, rdb.FanoutKey("order"))
	eventually(t, 20*time.Second, "the marker set again and the category's fan workers woken", func() bool {
		return gaps() > before && c.Exists(ctx, rdb.FanoutKey("order")).Val() == 1
	})
}

// An engine whose own signal stream is lost (a Redis restart without
// persistence, a stall past its TTL) makes it again at its next
// heartbeat, and every idle partition reads once: the stream may have
// held signals for it. Publishes meanwhile found no stream and signalled
// every instance.
func TestOwnSignalStreamLostWakesPartitions(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	r, err := tryStart(t, c, fastOptions("a"), keyedHandler("orders", func(context.Context, *testEvent) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	own := rdb.OwnerSignalKey(r.incarnation)
	if n := c.Exists(ctx, own).Val(); n != 1 {
		t.Fatal("no signal stream of its own after Run started")
	}
	gaps := func() uint64 {
		r.wake.mu.Lock()
		defer r.wake.mu.Unlock()
		return r.wake.gaps["order"]
	}
	before := gaps()
	c.Del(ctx, own)
	eventually(t, 20*time.Second, "the stream made again and the partitions woken", func() bool {
		return gaps() > before && c.Exists(ctx, own).Val() == 1
	})
	r.stop()
	if n := c.Exists(ctx, own).Val(); n != 0 {
		t.Fatal("the signal stream outlived Run")
	}
}
