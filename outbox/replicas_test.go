package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// A relay whose publisher waits for replicas (PublisherOptions.ReplicaAcks)
// keeps a record PENDING while they do not acknowledge it, publishing it
// again (the same message id) until they do, and the stream then holds it
// once: ErrNotDurable is a failure worth retrying, and the retry is
// deduplicated.
func TestRelayWaitsForReplicas(t *testing.T) {
	e := newEnv(t, outbox.SQLite, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := redistest.StartSentinel(ctx, 1, 0, redistest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	e.rc = redis.NewClient(&redis.Options{Addr: s.Nodes[0].Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { e.rc.Close() })
	eventually(t, 20*time.Second, "the replica in sync", func() bool {
		n, err := e.rc.Wait(ctx, 1, 100*time.Millisecond).Result()
		return err == nil && n == 1
	})
	resume := redistest.Paused(t, s.Nodes[1])
	pub := &countingPublisher{p: runtime.NewPublisher(e.rc, runtime.PublisherOptions{ReplicaAcks: 1, ReplicaTimeout: 50 * time.Millisecond})}
	if err := e.placeOrder(ctx, "o-1", &placed{Client: "c-1", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	e.relay(t, pub, outbox.RelayOptions{PollInterval: 20 * time.Millisecond})
	eventually(t, 20*time.Second, "two publishes of the record", func() bool { return pub.total() >= 2 })
	if n := e.pending(t); n != 1 {
		t.Fatalf("%d records PENDING while the replica is stopped, want 1", n)
	}
	resume()
	eventually(t, 30*time.Second, "the record published", func() bool { return e.pending(t) == 0 })
	if got := seqs(e.stream(t, "order:{c-1}")); len(got) != 1 || got[0] != 1 {
		t.Fatalf("stream of c-1: %v, want [1] (once)", got)
	}
}
