package runtime

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// limitedUser creates user on s with the engine rules of docs/operating.md minus the
// given commands, and returns a client logged in as it.
func limitedUser(t *testing.T, s *redistest.Server, user string, without ...string) *redis.Client {
	t.Helper()
	var rules []string
	for _, r := range aclRules(t, "seqby-engine", user+"-secret", "order") {
		if !slices.Contains(without, r) {
			rules = append(rules, r)
		}
	}
	if len(rules) != len(aclRules(t, "seqby-engine", user+"-secret", "order"))-len(without) {
		t.Fatalf("the engine rules of docs/operating.md lack one of %v", without)
	}
	if _, err := s.Do(append([]string{"ACL", "SETUSER", user}, rules...)...); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Username: user, Password: user + "-secret", ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// adminRedis starts a private server and returns it with a client of its
// default (unrestricted) user.
func adminRedis(t *testing.T) (*redistest.Server, *redis.Client) {
	s := redistest.New(t)
	admin := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { admin.Close() })
	return s, admin
}

// refused reports whether s carries an ACL refusal: NOPERM, or from a
// script on Redis 7.0 "ERR The user executing the script can't run this
// command".
func refused(s string) bool {
	return strings.Contains(s, "NOPERM") || strings.Contains(s, "can't run this command")
}

// startRun runs e until the returned cancel; done is closed when Run has
// returned, *err holding its result.
func startRun(t *testing.T, e *Engine) (cancel func(), done <-chan struct{}, err *error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	var runErr error
	go func() { runErr = e.Run(ctx); close(ch) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
		}
	})
	return cancel, ch, &runErr
}

// partitionLeaseKey is the lease key of handler's partition key in order.
func partitionLeaseKey(handler, key string) string {
	return rdb.PartitionLease(rdb.PartitionStream("order", key), handler).Key
}

// Finding 4: a Redis error that cannot pass (here NOPERM: the ACL user
// lacks XACK, which the fenced ack script calls) used to be retried every
// RetryBackoff forever while the heartbeat kept the lease, and Run did not
// return after its context ended. Run must return promptly after cancel,
// with the partition released.
func TestRunReturnsWhileRedisRefuses(t *testing.T) {
	s := redistest.New(t)
	admin := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { admin.Close() })
	noack := limitedUser(t, s, "noack", "+xack")
	ctx := ctxT(t)

	var logs syncBuffer
	opts := fastOptions("noack")
	opts.Retry.RetryBackoff, opts.Retry.MaxBackoff = 500*time.Millisecond, 5*time.Second // 5 permanent errors take 7.5 s
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	e, err := NewEngine(noack, opts)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	var once sync.Once
	if err := e.Register(keyedHandler("orders", func(context.Context, *testEvent) error { once.Do(func() { close(ran) }); return nil })); err != nil {
		t.Fatal(err)
	}
	cancel, done, runErr := startRun(t, e)
	if err := NewPublisher(admin).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	<-ran
	eventually(t, 10*time.Second, "the ack refused", func() bool { return refused(logs.String()) })

	cancel()
	select {
	case <-done:
		if *runErr != nil {
			t.Fatalf("Run: %v", *runErr)
		}
	case <-time.After(10 * time.Second): // releaseGrace is LeaseTTL (1 s)
		t.Fatalf("Run did not return 10 s after its context ended while Redis refused the ack; logs:\n%s", logs.String())
	}
	if n, err := admin.Exists(ctx, partitionLeaseKey("orders", "a")).Result(); err != nil || n != 0 {
		t.Fatalf("the partition's lease is still held after Run returned (exists %d, %v)", n, err)
	}
}

// Finding 4: after PermanentRedisErrors permanent errors the worker
// releases its partition and reports it (OnFault, Status.Faults), does not
// claim it again while benched, and leaves the member set, so a healthy
// instance takes the partition and everything is processed in order.
func TestPermanentRedisErrorsReleaseThePartition(t *testing.T) {
	s, admin := adminRedis(t)
	noack := limitedUser(t, s, "noack", "+xack")
	ctx := ctxT(t)

	faults := make(chan Fault, 16)
	opts := fastOptions("noack")
	opts.OnFault = func(f Fault) { faults <- f }
	j := newJournal()
	handler := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	bad := startEngine(t, noack, opts, handler)
	const n = 3
	for i := 1; i <= n; i++ {
		if err := NewPublisher(admin).Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	var f Fault
	select {
	case f = <-faults:
	case <-time.After(20 * time.Second):
		t.Fatal("no fault reported for a partition whose acks are refused")
	}
	if f.Kind != FaultReleased || f.Handler != "orders" || f.Key != "a" || f.Err == nil || !refused(f.Err.Error()) ||
		f.Until.Sub(f.Since) != FaultBench {
		t.Fatalf("fault = %+v", f)
	}
	// (The fault is reported as the release begins: wait for it to end.
	// Tokens are "noack~<incarnation>:<generation>".)
	eventually(t, 10*time.Second, "the lease released", func() bool {
		v, _ := admin.Get(ctx, partitionLeaseKey("orders", "a")).Result()
		return !strings.HasPrefix(v, "noack~") && len(bad.Status().Partitions) == 0
	})
	if st := bad.Status(); len(st.Faults) != 1 || st.Faults[0].Kind != FaultReleased || len(st.Partitions) != 0 {
		t.Fatalf("status = %+v", st)
	}
	// Its heartbeats report it in Redis, for operators (the console).
	eventually(t, 10*time.Second, "the fault reported in Redis", func() bool {
		fs, err := inspect.New(admin).Faults(ctx)
		return err == nil && len(fs) == 1 && fs[0].Owner == "noack" && fs[0].Kind == "released" && fs[0].Key == "a" && refused(fs[0].Err)
	})

	good := startEngine(t, admin, fastOptions("good"), handler)
	eventually(t, 20*time.Second, "the healthy instance applies everything", func() bool { return j.count("a") >= n })
	eventually(t, 10*time.Second, "every entry acked", func() bool {
		stream := rdb.PartitionStream("order", "a")
		p, err := admin.XPending(ctx, stream, laneGroup(t, admin, stream, "orders")).Result()
		return err == nil && p.Count == 0
	})
	// At-least-once: the entry the bad instance processed but could not
	// ack runs again, in order.
	if seqs := j.seqs("a"); !slices.IsSorted(seqs) || seqs[len(seqs)-1] != n {
		t.Fatalf("applied %v", seqs)
	}
	if len(good.Status().Partitions) != 1 || len(bad.Status().Partitions) != 0 {
		t.Fatalf("good owns %d, the benched instance %d", len(good.Status().Partitions), len(bad.Status().Partitions))
	}
	if len(j.overlap) > 0 {
		t.Fatalf("overlap: %v", j.overlap)
	}
}

// Finding 6: an instance whose acquires fail (its ACL user lacks SET, which
// the acquire script calls) used to keep announcing itself, so fair share
// counted it and the healthy instance stopped at ceil(4/2) = 2 partitions,
// leaving 2 without an owner. It must leave the member set while it makes
// no progress, so the healthy instance takes all 4.
func TestFailingClaimsDoNotStrandPartitions(t *testing.T) {
	s, admin := adminRedis(t)
	noset := limitedUser(t, s, "noset", "+set")
	ctx := ctxT(t)

	var mu sync.Mutex
	applied := map[string]bool{}
	handler := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		mu.Lock()
		applied[e.Client] = true
		mu.Unlock()
		return nil
	})
	keys := []string{"a", "b", "c", "d"}
	for _, k := range keys {
		if err := NewPublisher(admin).Publish(ctx, ev(k, 1)); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, noset, fastOptions("noset"), handler)
	startEngine(t, admin, fastOptions("good"), handler)
	eventually(t, 20*time.Second, "every partition applied", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(applied) == len(keys)
	})
}

// Finding 6: a partition with work that no instance manages to claim is
// reported after UnownedAfter (log, OnFault, Status.Faults), and the report
// ends once it has an owner.
func TestUnownedPartitionsAreReported(t *testing.T) {
	s, admin := adminRedis(t)
	noset := limitedUser(t, s, "noset", "+set")
	ctx := ctxT(t)

	applied := make(chan struct{})
	var once sync.Once
	handler := keyedHandler("orders", func(context.Context, *testEvent) error { once.Do(func() { close(applied) }); return nil })
	if err := NewPublisher(admin).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	faults := make(chan Fault, 16)
	opts := fastOptions("noset")
	opts.OnFault = func(f Fault) { faults <- f }
	bad := startEngine(t, noset, opts, handler)
	var f Fault
	select {
	case f = <-faults:
	case <-time.After(20 * time.Second):
		t.Fatal("no fault reported for a partition no instance can claim")
	}
	if f.Kind != FaultUnowned || f.Handler != "orders" || f.Key != "a" || f.Category != "order" ||
		f.Stream != rdb.PartitionStream("order", "a") || time.Since(f.Since) < bad.UnownedAfter() {
		t.Fatalf("fault = %+v", f)
	}
	if st := bad.Status(); len(st.Faults) != 1 || st.Faults[0].Kind != FaultUnowned {
		t.Fatalf("status faults = %+v", st.Faults)
	}

	startEngine(t, admin, fastOptions("good"), handler)
	select {
	case <-applied:
	case <-time.After(20 * time.Second):
		t.Fatal("the healthy instance did not apply the partition")
	}
	eventually(t, 20*time.Second, "the reports ended", func() bool { return len(bad.Status().Faults) == 0 })
}

// One partition every instance fails to acquire (a corrupted generation
// key) is that partition's fault, not the instances': they stay in the
// member set, fair share holds, and the other partitions are all owned.
func TestOneBadPartitionDoesNotStallInstances(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	keys := []string{"a", "b", "c", "d", "bad"}
	for _, k := range keys {
		if err := NewPublisher(c).Publish(ctx, ev(k, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.HSet(ctx, rdb.MetaKey(rdb.LeaseKey(rdb.PartitionStream("order", "bad"), "orders")), rdb.MetaGen, "not-a-number").Err(); err != nil {
		t.Fatal(err)
	}
	handler := keyedHandler("orders", func(context.Context, *testEvent) error { return nil })
	var logs [2]syncBuffer
	var engines [2]*running
	for i, owner := range []string{"e1", "e2"} {
		opts := fastOptions(owner)
		opts.Logger = slog.New(slog.NewTextHandler(&logs[i], nil))
		engines[i] = startEngine(t, c, opts, handler)
	}
	owned := func() int {
		n := 0
		for _, e := range engines {
			n += len(e.Status().Partitions)
		}
		return n
	}
	eventually(t, 20*time.Second, "the good partitions owned and the bad one tried", func() bool {
		return owned() == 4 && (strings.Contains(logs[0].String(), "acquiring a lease failed") ||
			strings.Contains(logs[1].String(), "acquiring a lease failed"))
	})
	// Both stay members through many discovery cycles (each 50 ms).
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		live, err := rdb.LiveMembers(ctx, c, "orders", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !live["e1"] || !live["e2"] {
			t.Fatalf("live members %v: one bad partition took an instance out of fair share", live)
		}
	}
	for i, e := range engines {
		if n := len(e.Status().Partitions); n > 3 {
			t.Errorf("engine %d owns %d partitions, above its share ceil(5/2) = 3", i+1, n)
		}
	}
}
