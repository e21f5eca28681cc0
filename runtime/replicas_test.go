package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// strictOptions are fastOptions in the strict mode with one replica and
// short barriers, logging at debug level to logs when not nil.
func strictOptions(owner string, logs io.Writer) Options {
	o := fastOptions(owner)
	o.ReplicaAcks, o.ReplicaTimeout = 1, 50*time.Millisecond
	if logs != nil {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return o
}

// In the strict mode no attempt starts while fewer replicas than
// ReplicaAcks acknowledge the writes before it: with the only replica
// stopped (SIGSTOP), the next event waits, barriers come back short, and
// the event runs once the replica is back. In the default mode the event
// would run at once (seen: the handler ran event 2 with the replica
// stopped when awaitReplicas was a no-op).
func TestStrictModeWaitsForReplicas(t *testing.T) {
	s, c := redistest.NewReplicated(t, 1)
	var ran atomic.Int32
	opts := strictOptions("strict", nil)
	r := startEngine(t, c, opts, keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		ran.Store(int32(e.Seq))
		return nil
	}))
	ctx := ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	if err := p.Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "event 1 run", func() bool { return ran.Load() == 1 })
	resume := redistest.Paused(t, s.Nodes[1])
	before := r.replicas.Shorts()
	if err := p.Publish(ctx, ev("a", 2)); err != nil {
		t.Fatal(err)
	}
	// Barriers run only while a partition waits: two short ones mean
	// event 2 waited through them.
	eventually(t, 10*time.Second, "two short barriers", func() bool {
		if got := ran.Load(); got != 1 {
			t.Fatalf("event %d ran while the only replica was stopped", got)
		}
		return r.replicas.Shorts() >= before+2
	})
	resume()
	eventually(t, 10*time.Second, "event 2 run once the replica is back", func() bool { return ran.Load() == 2 })
	r.stop()
}

// Run refuses the strict mode where Redis cannot keep it: fewer replicas
// connected than ReplicaAcks, or no replica at all, on a primary or on
// any primary of a Redis Cluster.
func TestStrictModeRefusals(t *testing.T) {
	_, replicated := redistest.NewReplicated(t, 1)
	single := redis.NewClient(&redis.Options{Addr: redistest.New(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { single.Close() })
	for _, tt := range []struct {
		name string
		c    redis.UniversalClient
		acks int
	}{
		{"two acks, one replica", replicated, 2},
		{"no replica", single, 1},
		{"cluster, two acks, one replica per primary", redistest.NewClusterReplicas(t, 3, 1).Client(t), 2},
		{"cluster without replicas", redistest.NewCluster(t, 3).Client(t), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := fastOptions("strict")
			opts.ReplicaAcks = tt.acks
			e, err := NewEngine(tt.c, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Register(keyedHandler("orders", func(context.Context, *testEvent) error { return nil })); err != nil {
				t.Fatal(err)
			}
			err = e.Run(ctxT(t))
			if !errors.Is(err, ErrReplicas) {
				t.Fatalf("Run: %v, want ErrReplicas", err)
			}
			t.Log(err)
		})
	}
	if _, err := NewEngine(single, Options{ReplicaAcks: -1}); !errors.Is(err, ErrOptions) {
		t.Fatalf("NewEngine with ReplicaAcks -1: %v, want ErrOptions", err)
	}
}

// In the default mode Run warns when a primary with replicas does not
// stop writing once cut off from them within a lease's life, and is quiet
// when min-replicas-to-write and min-replicas-max-lag bound it.
func TestReplicationWarning(t *testing.T) {
	_, c := redistest.NewReplicated(t, 1)
	for _, tt := range []struct {
		name      string
		toWrite   string
		maxLag    string
		wantWarns bool
	}{
		{"unbounded", "0", "10", true},
		{"lag beyond the lease", "1", "10", true},
		{"bounded", "1", "1", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxT(t)
			if err := c.ConfigSet(ctx, "min-replicas-to-write", tt.toWrite).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.ConfigSet(ctx, "min-replicas-max-lag", tt.maxLag).Err(); err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			opts := fastOptions("w")
			opts.LeaseTTL, opts.HeartbeatInterval = 5*time.Second, time.Second
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			r := startEngine(t, c, opts, keyedHandler("orders", func(context.Context, *testEvent) error { return nil }))
			eventually(t, 10*time.Second, "the engine consuming", func() bool { return r.Status().Consuming })
			r.stop()
			if got := strings.Contains(logs.String(), "min-replicas-to-write"); got != tt.wantWarns {
				t.Fatalf("warned: %v, want %v; logs:\n%s", got, tt.wantWarns, logs.String())
			}
		})
	}
}

// A publish answered ErrNotDurable and published again with the same
// message id (from another client: a retry in another process) is
// durable only once the first append is on the replicas: the re-publish
// stores nothing, and its wait must still count from the first append.
// (Redis 7.0 counts a WAIT from the connection's last command, write or
// not, so this held before append_once rewrote the id on a duplicate;
// the rewrite keeps it where WAIT counts from the last write only.)
// PublisherOptions.ReplicaAcks is the same wait for every publish and
// record; PublishBatch refuses it.
func TestRepublishAfterNotDurable(t *testing.T) {
	s, c := redistest.NewReplicated(t, 1)
	ctx := ctxT(t)
	resume := redistest.Paused(t, s.Nodes[1])
	strict := NewPublisher(c, PublisherOptions{ReplicaAcks: 1, ReplicaTimeout: 100 * time.Millisecond})
	if err := strict.Publish(ctx, ev("a", 1), WithMessageID("m1")); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("publish with the replica stopped: %v, want ErrNotDurable", err)
	}
	again := redis.NewClient(&redis.Options{Addr: s.Nodes[0].Addr, ContextTimeoutEnabled: true})
	defer again.Close()
	retry := NewPublisher(again, PublisherOptions{ReplicaAcks: 1, ReplicaTimeout: 100 * time.Millisecond})
	if err := retry.Publish(ctx, ev("a", 1), WithMessageID("m1")); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("re-publish with the replica still stopped: %v, want ErrNotDurable", err)
	}
	if err := retry.PublishBatch(ctx, []Message{ev("a", 2)}); !errors.Is(err, ErrPublish) {
		t.Fatalf("PublishBatch with ReplicaAcks: %v, want ErrPublish", err)
	}
	resume()
	if err := retry.Publish(ctx, ev("a", 1), WithMessageID("m1"), WaitForReplicas(1, 10*time.Second)); err != nil {
		t.Fatalf("re-publish with the replica back: %v", err)
	}
	if n := c.XLen(ctx, "order:{a}").Val(); n != 1 {
		t.Fatalf("the stream holds %d entries, want 1 (the re-publishes were deduplicated)", n)
	}
}

// A keyed handler and an unkeyed one get the engine's own client from
// their context, to commit through (one process, one primary at a time).
func TestClientFromContext(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.New(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	got := make(chan redis.UniversalClient, 2)
	handler := func(ctx context.Context, _ *testEvent) error {
		rc, ok := ClientFromContext(ctx)
		if !ok {
			rc = nil
		}
		got <- rc
		return nil
	}
	unkeyed := Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("", handler)}}
	r := startEngine(t, c, fastOptions("ctx"), keyedHandler("orders", handler), unkeyed)
	if err := NewPublisher(c).Publish(ctxT(t), ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if rc := <-got; rc != redis.UniversalClient(c) {
			t.Fatalf("ClientFromContext gave %v, want the engine's client", rc)
		}
	}
	r.stop()
	if _, ok := ClientFromContext(context.Background()); ok {
		t.Fatal("ClientFromContext outside a handler: ok")
	}
}

// A partition that stops while it waits for replicas hands its entry back
// with its delivery: one that waits to start never ran, one that waits to
// be acked ran but is no poison. With MaxDeliveries 1 the next owner runs
// the entry rather than halt on it. Seen failing (a reviewer's case) when
// the gate's refusal counted as a lost lease, and when the ack's wait
// left the entry pending: the next owner halted, "delivered 2 times".
func TestStrictModeStopGivesTheDeliveryBack(t *testing.T) {
	for _, tt := range []struct {
		name string
		// pauseIn: the handler stops the replica while it runs event 1
		// (its ack waits); else the replica is stopped once event 1 is
		// acked, and event 2 waits to start.
		pauseIn bool
		want    int32 // the event the next owner must run
	}{
		{"waiting to start", false, 2},
		{"waiting to ack", true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, c := redistest.NewReplicated(t, 1)
			var ran, runs atomic.Int32
			var paused atomic.Bool
			opts := func(owner string) Options {
				o := fastOptions(owner)
				o.ReplicaAcks, o.ReplicaTimeout, o.MaxDeliveries = 1, 50*time.Millisecond, 1
				return o
			}
			h := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
				if tt.pauseIn && paused.CompareAndSwap(false, true) {
					if err := s.Nodes[1].Pause(); err != nil {
						return err
					}
				}
				ran.Store(int32(e.Seq))
				runs.Add(1)
				return nil
			})
			defer func() {
				if paused.Load() {
					s.Nodes[1].Resume()
				}
			}()
			r := startEngine(t, c, opts("s1"), h)
			ctx := ctxT(t)
			p := NewPublisher(c, PublisherOptions{})
			if err := p.Publish(ctx, ev("a", 1)); err != nil {
				t.Fatal(err)
			}
			before := r.replicas.Shorts()
			if !tt.pauseIn {
				eventually(t, 10*time.Second, "event 1 acked", func() bool {
					n, err := c.XPending(ctx, "order:{a}", laneGroup(t, c, "order:{a}", "orders")).Result()
					return ran.Load() == 1 && err == nil && n.Count == 0
				})
				paused.Store(true)
				if err := s.Nodes[1].Pause(); err != nil {
					t.Fatal(err)
				}
				before = r.replicas.Shorts()
				if err := p.Publish(ctx, ev("a", 2)); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 10*time.Second, "an entry waiting for the replica", func() bool { return r.replicas.Shorts() >= before+2 })
			r.stop()
			paused.Store(false)
			if err := s.Nodes[1].Resume(); err != nil {
				t.Fatal(err)
			}
			var halts atomic.Int32
			o2 := opts("s2")
			o2.OnHalt = func(Halt) { halts.Add(1) }
			was := runs.Load()
			startEngine(t, c, o2, h)
			eventually(t, 20*time.Second, fmt.Sprintf("event %d run by the next owner", tt.want), func() bool {
				if halts.Load() > 0 {
					t.Fatal("the next owner halted on an entry handed back")
				}
				return runs.Load() > was && ran.Load() == tt.want
			})
		})
	}
}

// In the strict mode a renewal moves the lease's local deadline only once
// replicas confirm it: with the only replica stopped, the owner counts
// its lease lost at the deadline, as a new primary without the renewals
// would let it expire. Seen failing when every renewal the primary
// answered moved the deadline: the lease was never counted lost.
func TestStrictModeRenewalsWaitForReplicas(t *testing.T) {
	s, c := redistest.NewReplicated(t, 1)
	var logs syncBuffer
	opts := strictOptions("renew", &logs)
	var ran atomic.Int32
	r := startEngine(t, c, opts, keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		ran.Store(int32(e.Seq))
		return nil
	}))
	if err := NewPublisher(c).Publish(ctxT(t), ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "event 1 run", func() bool { return ran.Load() == 1 })
	resume := redistest.Paused(t, s.Nodes[1])
	// (Logged at debug level: the barrier's warning says why, once.)
	eventually(t, 10*time.Second, "the lease counted lost at its deadline", func() bool {
		return strings.Contains(logs.String(), "level=DEBUG msg=\"seqby: lease lost; abandoning the partition\"") &&
			strings.Contains(logs.String(), "lease not renewed before its deadline")
	})
	resume()
	r.stop()
}

// In the strict mode an unkeyed handler's entry is acked only once what
// it committed is on the replicas: with the only replica stopped, the
// entry it ran stays pending, and is acked once the replica is back. Seen
// failing when the unfenced worker acked right after the handler: nothing
// was pending while the replica was stopped.
func TestStrictModeUnkeyedAckWaits(t *testing.T) {
	s, c := redistest.NewReplicated(t, 1)
	opts := strictOptions("unkeyed", nil)
	var ran atomic.Int32
	// The keyed handler makes the category partitioned (the unkeyed one
	// then reads each partition's stream).
	r := startEngine(t, c, opts, keyedHandler("orders", func(context.Context, *testEvent) error { return nil }),
		Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("", func(context.Context, *testEvent) error {
			ran.Add(1)
			return nil
		})}})
	eventually(t, 10*time.Second, "the engine consuming", func() bool { return r.Status().Consuming })
	resume := redistest.Paused(t, s.Nodes[1])
	ctx := ctxT(t)
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	before := r.replicas.Shorts()
	eventually(t, 10*time.Second, "the entry run, its ack waiting", func() bool { return ran.Load() == 1 && r.replicas.Shorts() >= before+2 })
	pending := func() int64 {
		n, err := c.XPending(ctx, "order:{a}", "audit").Result()
		if err != nil {
			return -1
		}
		return n.Count
	}
	if n := pending(); n != 1 {
		t.Fatalf("%d entries pending while the replica is stopped, want 1 (acked before its effects were confirmed)", n)
	}
	resume()
	eventually(t, 10*time.Second, "the entry acked", func() bool { return pending() == 0 })
	r.stop()
}

// While the strict mode waits for replicas, each partition with work
// loses its lease every LeaseTTL (its renewals are not confirmed) and is
// claimed again: the engine says once what it waits for (the barrier's
// warning), and logs those losses at debug level, not a warning per key
// per LeaseTTL. Seen failing before: "lease lost; abandoning the
// partition" as a warning for every key, every second here.
func TestStrictModeWaitIsSaidOnce(t *testing.T) {
	s, c := redistest.NewReplicated(t, 1)
	var logs syncBuffer
	opts := strictOptions("said", &logs)
	var ran atomic.Int32
	r := startEngine(t, c, opts, keyedHandler("orders", func(context.Context, *testEvent) error {
		ran.Add(1)
		return nil
	}))
	eventually(t, 10*time.Second, "the engine consuming", func() bool { return r.Status().Consuming })
	resume := redistest.Paused(t, s.Nodes[1])
	ctx := ctxT(t)
	p := NewPublisher(c)
	const keys = 5
	for k := range keys {
		if err := p.Publish(ctx, ev(fmt.Sprintf("k%d", k), 1)); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	// Two losses per key: the wait went on for two lease lives.
	eventually(t, 30*time.Second, "every lease lost twice while waiting", func() bool {
		return strings.Count(logs.String(), "lease not renewed before its deadline") >= 2*keys
	})
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d events ran while the only replica was stopped", n)
	}
	resume()
	eventually(t, 20*time.Second, "every event run once the replica is back", func() bool { return ran.Load() == keys })
	r.stop()
	out := logs.String()
	if n := strings.Count(out, "level=WARN msg=\"seqby: lease lost"); n > 0 {
		t.Errorf("%d lost leases logged as warnings while the strict mode waited for replicas", n)
	}
	if n := strings.Count(out, "fewer replicas than Options.ReplicaAcks acknowledged"); n != 1 {
		t.Errorf("the wait was said %d times, want once", n)
	}
}

// On a Redis Cluster in the strict mode a shard whose replica is stopped
// holds its own keys only: b's event, on another shard, runs while a's
// waits, and a's runs once the replica is back. Seen failing before the
// strict mode ran on a cluster (NewEngine refused it).
func TestStrictModeWaitsForReplicasPerShard(t *testing.T) {
	c := redistest.NewClusterReplicas(t, 3, 1)
	cc := c.Client(t)
	a, b := c.KeysOnTwoShards(t)
	var ranA, ranB atomic.Int32
	opts := strictOptions("strict", nil)
	r := startEngine(t, cc, opts, keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		if e.Client == a {
			ranA.Store(int32(e.Seq))
		} else {
			ranB.Store(int32(e.Seq))
		}
		return nil
	}))
	ctx := ctxT(t)
	p := NewPublisher(cc)
	if err := p.Publish(ctx, ev(a, 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a's event 1 run", func() bool { return ranA.Load() == 1 })
	primary, err := c.PrimaryOf("order:{" + a + "}")
	if err != nil {
		t.Fatal(err)
	}
	replica, err := c.ReplicaOf(primary)
	if err != nil {
		t.Fatal(err)
	}
	resume := redistest.Paused(t, replica)
	before := r.replicas.Shorts()
	for _, m := range []Message{ev(a, 2), ev(b, 1)} {
		if err := p.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "b's event run, a's waiting through two short barriers", func() bool {
		if got := ranA.Load(); got != 1 {
			t.Fatalf("a's event %d ran while its shard's only replica was stopped", got)
		}
		return ranB.Load() == 1 && r.replicas.Shorts() >= before+2
	})
	resume()
	eventually(t, 10*time.Second, "a's event 2 run once the replica is back", func() bool { return ranA.Load() == 2 })
	r.stop()
}
