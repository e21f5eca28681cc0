package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// signalsRead is how many signals the engine's waiter has counted.
func signalsRead(r *running) uint64 {
	return r.wake.Stats("", "").Total
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
		return z.disc.ColdMarks() == 1
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
		return r.wake.Stats("order", "").Gap
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
		return r.wake.Stats("order", "").Gap
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

// A sequential pm holds a correlation value before one of its categories
// has a stream for it; once that stream exists and another handler's
// owner, on another instance, is named in its wake hash, a publish to it
// must still wake the pm's owner. Before, the pm was named only by its
// next renewal and a publish signalled the other owner alone: the pm
// applied the event at its idle safety-net re-read (24-36 s). Its
// heartbeat is a minute here, so no renewal runs during the test.
func TestPMWokenOnACategoryStreamCreatedAfterItsLease(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		pm, did, mark := recordingPM()
		rt := pmRoute("pmpayment", "pmPayment", func(m *pmPayment) string { return m.OrderID }, nil)
		rt.CorrelateField, rt.Correlate = "", nil
		rt.Invoke = func(_ context.Context, _ any, m any) error {
			mark(fmt.Sprintf("keyed/%d", m.(*pmPayment).Seq))
			return nil
		}
		payments := Registration{Name: "payments", Kind: EventHandler, Key: "order_id", Sequential: true, Routes: []Route{rt}}

		calls := &scriptArgs{}
		pc := sameServer(t, c)
		pc.AddHook(calls)
		po := fastOptions("p")
		po.LeaseTTL, po.HeartbeatInterval = 2*time.Minute, time.Minute
		pe := startEngine(t, pc, po, pm)
		startEngine(t, c, fastOptions("k"), payments)
		p := NewPublisher(c)

		// The pm takes o-1 through its order; o-1 has no payment stream.
		if err := p.Publish(ctx, &pmOrder{OrderID: "o-1", Seq: 1}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the pm to apply order 1 and sleep", func() bool {
			return did("order/1") && asleep(pe.Engine, "pmpayment", "o-1")
		})
		lane := rdb.PartitionStream("pmpayment", "o-1")
		trims := func() int { return calls.trimming(lane) }
		before := trims()

		// The payment stream appears (a new key: every instance is
		// signalled); the keyed handler's owner names itself there.
		if err := p.Publish(ctx, &pmPayment{OrderID: "o-1", Seq: 1}); err != nil {
			t.Fatal(err)
		}
		wake := rdb.WakeKey(lane)
		eventually(t, 20*time.Second, "both to apply payment 1, the keyed owner named", func() bool {
			return did("payment/1") && did("keyed/1") && c.HGet(ctx, wake, "payments").Val() != ""
		})
		// The pm's trim of what it acked may still be due (it trims at
		// most once a second), and its wake-up would read payment 2 too:
		// wait until it trimmed the payment lane and sleeps with nothing
		// due but its safety net.
		eventually(t, 20*time.Second, "the pm to trim the payment lane and sleep", func() bool {
			return trims() > before && asleep(pe.Engine, "pmpayment", "o-1")
		})

		if err := p.Publish(ctx, &pmPayment{OrderID: "o-1", Seq: 2}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the pm to apply payment 2 (its safety-net re-read is 24-36 s away)", func() bool {
			return did("payment/2")
		})
		eventually(t, 20*time.Second, "the keyed handler to apply payment 2", func() bool { return did("keyed/2") })
		if got := c.HGet(ctx, wake, "flow").Val(); got != pe.incarnation {
			t.Fatalf("the wake hash names %q for the pm, want its owner %s", got, pe.incarnation)
		}
	})
}

// A renewal that names a pm's owner in the wake hash of a stream that
// appeared during its lease, and which it has not read yet, wakes it
// once: publishes before the renewal signalled only the owner named
// there. The first entry's publish here signals that other owner alone
// (the key was indexed before, and the hash named it), as when the
// signal that would have woken every instance was lost. Before, the
// renewal named the pm and nothing woke it until its safety-net re-read
// (24-36 s).
func TestPMWokenWhenARenewalNamesIt(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		pm, did, _ := recordingPM()
		pe := startEngine(t, c, fastOptions("p"), pm)
		p := NewPublisher(c)
		if err := p.Publish(ctx, &pmOrder{OrderID: "o-1", Seq: 1}); err != nil {
			t.Fatal(err)
		}
		// Asleep after its first trim (due at once), with nothing due but
		// its safety net.
		eventually(t, 20*time.Second, "the pm to apply order 1 and sleep", func() bool {
			return did("order/1") && asleep(pe.Engine, "pmpayment", "o-1")
		})
		lane := rdb.PartitionStream("pmpayment", "o-1")
		if _, err := rdb.KeepOwnerSignals(ctx, c, "k~1", 100); err != nil { // a live engine's own stream
			t.Fatal(err)
		}
		if err := c.SAdd(ctx, rdb.IndexKey("pmpayment"), "o-1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HSet(ctx, rdb.WakeKey(lane), "payments", "k~1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := p.Publish(ctx, &pmPayment{OrderID: "o-1", Seq: 1}); err != nil {
			t.Fatal(err)
		}
		if n := c.XLen(ctx, rdb.OwnerSignalKey("k~1")).Val(); n != 2 {
			t.Fatalf("k~1's stream holds %d signals, want 2 (its first entry, the publish's): the test does not test what it says", n)
		}
		eventually(t, 10*time.Second, "the pm to apply payment 1 (its safety-net re-read is 24-36 s away)", func() bool {
			return did("payment/1")
		})
		if got := c.HGet(ctx, rdb.WakeKey(lane), "flow").Val(); got != pe.incarnation {
			t.Fatalf("the wake hash names %q for the pm, want its owner %s", got, pe.incarnation)
		}
	})
}

// sameServer is a new client of c's server or cluster, closed at cleanup.
func sameServer(t *testing.T, c redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	var out redis.UniversalClient
	switch c := c.(type) {
	case *redis.ClusterClient:
		out = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Options().Addrs, ContextTimeoutEnabled: true})
	case *redis.Client:
		out = redis.NewClient(&redis.Options{Addr: c.Options().Addr, ContextTimeoutEnabled: true})
	default:
		t.Fatalf("sameServer: a %T", c)
	}
	t.Cleanup(func() { out.Close() })
	return out
}

// trimming counts the retention calls the pm "flow" sent on lane
// (rdb.Trim: one key, the lane, then the category's groups, none of which
// has a colon, where a consumer name, del_idle_consumer's other one-key
// call, has one).
func (h *scriptArgs) trimming(lane string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, a := range h.calls {
		// evalsha sha numkeys key1 argv1 ...
		if len(a) <= 4 || fmt.Sprint(a[2]) != "1" || a[3] != lane || !slices.Contains(a[4:], any("flow")) {
			continue
		}
		if !slices.ContainsFunc(a[4:], func(v any) bool { return strings.Contains(fmt.Sprint(v), ":") }) {
			n++
		}
	}
	return n
}

// recordingPM is the flow pm recording each event it applies; did
// reports whether an event ("payment/2") was recorded, and mark records
// one for another handler of the test.
func recordingPM() (pm Registration, did func(ev string) bool, mark func(ev string)) {
	var mu sync.Mutex
	applied := map[string]bool{}
	mark = func(ev string) { mu.Lock(); defer mu.Unlock(); applied[ev] = true }
	pm = flowPM("flow", func(_ context.Context, _, ev string, _ *pmPayment) error {
		mark(ev)
		return nil
	})
	return pm, func(ev string) bool { mu.Lock(); defer mu.Unlock(); return applied[ev] }, mark
}
