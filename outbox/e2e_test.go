package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// orderLog is a keyed handler of placed: it records each key's seqs in the
// order it handled them, and refuses to run without a lease.
type orderLog struct {
	mu   sync.Mutex
	seen map[string][]int
}

func (o *orderLog) handle(ctx context.Context, p *placed) error {
	if _, ok := runtime.LeaseFromContext(ctx); !ok {
		return errors.New("no lease")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[p.Client] = append(o.seen[p.Client], p.Seq)
	return nil
}

func (o *orderLog) of(key string) []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen[key])
}

// registration is what seqgen would generate for orderLog.
func (o *orderLog) registration() runtime.Registration {
	return runtime.Registration{Name: "order-log", Kind: runtime.EventHandler, Key: "Client", Sequential: true,
		Routes: []runtime.Route{{
			Category: "order", Type: "placed", PartitionField: "Client",
			Decode: func(c runtime.Codec, p []byte) (any, error) {
				var m placed
				return &m, c.Unmarshal(p, &m)
			},
			PartitionKey: func(m any) (string, error) { return m.(*placed).PartitionKey() },
			Invoke:       func(ctx context.Context, _ any, m any) error { return o.handle(ctx, m.(*placed)) },
		}}}
}

// TestEndToEnd: events added with Add in business transactions (one of
// them failing on its key and rolling back) travel through the relay to a
// keyed handler run by a real engine, each key's in order, once each.
func TestEndToEnd(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		h := &orderLog{seen: map[string][]int{}}
		eng := seqbytest.StartEngine(t, []runtime.Registration{h.registration()},
			seqbytest.Options{RedisURL: "redis://" + e.redis.Addr, Timeout: 30 * time.Second})
		e.relay(t, eng.Publisher, outbox.RelayOptions{})
		ctx := context.Background()
		keys := []string{"c-1", "c-2", "c-3"}
		const n = 15
		for i := 1; i <= n; i++ {
			for _, k := range keys {
				if err := e.placeOrder(ctx, fmt.Sprintf("%s-%d", k, i), &placed{Client: k, Seq: i}); err != nil {
					t.Fatal(err)
				}
			}
			if i == 5 {
				if err := e.placeOrder(ctx, "bad", &placed{Client: "c:1", Seq: 99}); !errors.Is(err, runtime.ErrInvalidKey) {
					t.Fatalf("bad key: %v", err)
				}
			}
		}
		eng.Eventually("every event handled", func() bool {
			for _, k := range keys {
				if len(h.of(k)) < n {
					return false
				}
			}
			return true
		})
		eng.WaitDrained()
		for _, k := range keys {
			if got := h.of(k); !slices.Equal(got, upTo(n)) {
				t.Errorf("%s handled %v, want 1..%d in order, once each", k, got, n)
			}
		}
		if got := h.of("c:1"); len(got) != 0 {
			t.Errorf("the rolled-back event was handled: %v", got)
		}
		if e.count(t, `SELECT count(*) FROM orders`) != n*len(keys) {
			t.Error("business rows: the bad transaction left one, or a good one is missing")
		}
	})
}

// flakyPublisher fails the first attempt of every third record of each
// key with a transient error.
type flakyPublisher struct {
	p     *runtime.Publisher
	mu    sync.Mutex
	tried map[string]bool
}

func (f *flakyPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	var p placed
	json.Unmarshal(r.Payload, &p)
	f.mu.Lock()
	first := !f.tried[r.MessageID]
	f.tried[r.MessageID] = true
	f.mu.Unlock()
	if first && p.Seq%3 == 0 {
		return fmt.Errorf("timeout: %w", runtime.ErrPublish)
	}
	return f.p.PublishRecord(ctx, r)
}

// TestTransientFailureHoldsTheKey: when a record fails to publish, the
// later records of its key wait for it (next round) instead of
// overtaking it; other keys go on.
func TestTransientFailureHoldsTheKey(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		keys := []string{"c-1", "c-2"}
		const n = 20
		addOrders(t, e, keys, n)
		e.relay(t, &flakyPublisher{p: e.pub, tried: map[string]bool{}}, outbox.RelayOptions{BatchSize: 50})
		eventually(t, 20*time.Second, "every record published", func() bool { return e.pending(t) == 0 })
		checkStreams(t, e, keys, n)
	})
}
