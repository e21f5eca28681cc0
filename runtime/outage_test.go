package runtime

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// Finding 3 of issue #11: an outage of something the handler needs halts
// partitions for the outage only. The handler's store (a second
// redis-server) goes down; the handler fails fast, its retries run out and
// partitions halt; once the store is back, their heads are retried
// (HaltedRetryInterval) and every partition completes in order, nothing
// skipped, none left halted. (An outage of the engine's own Redis halts
// nothing: an attempt waits until it can verify its lease.)
func TestOutageHaltsOnlyForTheOutage(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	s, err := redistest.Start(sctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	store := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { store.Close() })

	j := newJournal()
	started := make(chan struct{}, 100)
	h := keyedHandler("h", func(ctx context.Context, e *testEvent) error {
		select {
		case started <- struct{}{}:
		default:
		}
		if err := store.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("store unavailable: %w", err)
		}
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		time.Sleep(20 * time.Millisecond) // each event takes a while, so the outage lands mid-stream
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	opts := fastOptions("r1")
	opts.LeaseTTL, opts.HeartbeatInterval = 10*time.Second, time.Second // leases outlive the outage
	opts.Retry.MaxRetries, opts.Retry.RetryBackoff, opts.Retry.MaxBackoff = 2, 10*time.Millisecond, 20*time.Millisecond
	opts.Retry.HaltedRetryInterval = 300 * time.Millisecond
	r := startEngine(t, c, opts, h)

	const keys, n = 4, 10
	p := NewPublisher(c)
	for i := 1; i <= n; i++ {
		for k := range keys {
			if err := p.Publish(ctx, ev(fmt.Sprint("k", k), i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	<-started
	s.Kill()
	eventually(t, 20*time.Second, "partitions halted during the outage", func() bool {
		for _, ps := range r.Status().Partitions {
			if ps.Halted {
				return true
			}
		}
		return false
	})
	if err := s.Restart(sctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "every partition completed after the outage", func() bool {
		for k := range keys {
			if j.count(fmt.Sprint("k", k)) < n {
				return false
			}
		}
		return true
	})
	for k := range keys {
		if got := j.seqs(fmt.Sprint("k", k)); !slices.Equal(got, seq(n)) {
			t.Errorf("k%d applied %v, want 1..%d", k, got, n)
		}
	}
	eventually(t, 10*time.Second, "no partition left halted", func() bool {
		for _, ps := range r.Status().Partitions {
			if ps.Halted {
				return false
			}
		}
		return true
	})
}
