package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A batch interleaving several partitions (and an unpartitioned
// category) is appended with each partition's order kept, and consumed in
// order.
func TestPublishBatchKeepsOrder(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		j := newJournal()
		notes := make(chan string, 100)
		startEngine(t, c, fastOptions("b1"),
			keyedHandler("orders", func(_ context.Context, e *testEvent) error {
				j.enter(e.Client, seqKey(e.Client, e.Seq))
				j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
				return nil
			}),
			noteHandler("notes", func(_ context.Context, n *testNote) error { notes <- n.Text; return nil }))
		const perKey = 40
		keys := []string{"a", "b", "c", "d"}
		var msgs []Message
		for i := 1; i <= perKey; i++ {
			for _, k := range keys {
				msgs = append(msgs, ev(k, i))
			}
			if i%10 == 0 {
				msgs = append(msgs, &testNote{Text: fmt.Sprint(i)})
			}
		}
		if err := NewPublisher(c).PublishBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "every entry applied", func() bool {
			for _, k := range keys {
				if j.count(k) < perKey {
					return false
				}
			}
			return len(notes) == perKey/10
		})
		for _, k := range keys {
			if seqs := j.seqs(k); !inOrder(seqs, perKey) {
				t.Fatalf("key %s applied %v", k, seqs)
			}
		}
	})
}

// A bad message anywhere in the batch fails the call before anything is
// written, naming its index; options that name one message are refused.
func TestPublishBatchRefusesBeforeWriting(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	p := NewPublisher(c)
	err := p.PublishBatch(ctx, []Message{ev("a", 1), ev("b", 1), ev("bad:key", 1), ev("a", 2)})
	if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), "message 2") {
		t.Fatalf("err = %v, want ErrInvalidKey naming message 2", err)
	}
	if n, _ := c.DBSize(ctx).Result(); n != 0 {
		keys, _ := c.Keys(ctx, "*").Result()
		t.Fatalf("a refused batch wrote %v", keys)
	}
	for _, opt := range []PublishOption{WithMessageID("m1"), WaitForReplicas(1, time.Second)} {
		if err := p.PublishBatch(ctx, []Message{ev("a", 1)}, opt); !errors.Is(err, ErrPublish) {
			t.Fatalf("err = %v, want ErrPublish", err)
		}
	}
	if err := p.PublishBatch(ctx, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}

// When one partition's stream cannot take entries (here it holds a
// string), the others are stored and the *BatchError tells which.
func TestPublishBatchPartialFailure(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		if err := c.Set(ctx, rdb.PartitionStream("order", "broken"), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		msgs := []Message{ev("a", 1), ev("broken", 1), ev("a", 2), ev("broken", 2)}
		err := NewPublisher(c).PublishBatch(ctx, msgs)
		var be *BatchError
		if !errors.As(err, &be) || !errors.Is(err, ErrPublish) {
			t.Fatalf("err = %v, want a *BatchError matching ErrPublish", err)
		}
		if want := []bool{true, false, true, false}; fmt.Sprint(be.Published) != fmt.Sprint(want) {
			t.Fatalf("published %v, want %v", be.Published, want)
		}
		if n, _ := c.XLen(ctx, rdb.PartitionStream("order", "a")).Result(); n != 2 {
			t.Fatalf("order:{a} has %d entries, want 2", n)
		}
	})
}
