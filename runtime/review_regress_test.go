package runtime

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// A duration under a millisecond is a unit mistake that Redis would
// truncate to 0 (PX 0 fails every acquire, BLOCK 0 waits forever).
func TestOptionsRejectSubMillisecondDurations(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { c.Close() })
	for _, o := range []Options{{LeaseTTL: 15000}, {BlockTimeout: 500 * time.Microsecond}} {
		_, err := NewEngine(c, o)
		if !errors.Is(err, ErrOptions) {
			t.Fatalf("NewEngine(%+v): %v, want an error matching ErrOptions", o, err)
		}
		if !strings.Contains(err.Error(), "time.Duration") {
			t.Errorf("error does not say the unit: %v", err)
		}
	}
	if _, err := NewEngine(c, Options{LeaseTTL: 15 * time.Second}); err != nil {
		t.Fatalf("a valid LeaseTTL was refused: %v", err)
	}
	// The retry policy's durations are checked too, named by their path.
	_, err := NewEngine(c, Options{Retry: RetryPolicy{RetryBackoff: 100}})
	if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "Retry.RetryBackoff") {
		t.Fatalf("NewEngine with Retry.RetryBackoff 100ns: %v, want ErrOptions naming Retry.RetryBackoff", err)
	}
}

// A lease acquire that fails for another reason than "held by another
// owner" leaves the partition unowned: it is logged (once, rate-limited),
// never swallowed.
func TestFailedAcquireIsLogged(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := rdb.PartitionStream("order", "a")
	// A generation counter that is not an integer makes every acquire fail.
	if err := c.HSet(ctx, rdb.MetaKey(rdb.LeaseKey(stream, "orders")), rdb.MetaGen, "not-a-number").Err(); err != nil {
		t.Fatal(err)
	}
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	logs := &logsink.Buffer{}
	opts := fastOptions("p1")
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r := startEngine(t, c, opts, keyedHandler("orders", func(context.Context, *testEvent) error { return nil }))
	const msg = "acquiring a lease failed"
	eventually(t, 10*time.Second, "the failed acquire logged", func() bool { return strings.Contains(logs.String(), msg) })
	r.stop()
	if n := strings.Count(logs.String(), msg); n != 1 {
		t.Errorf("failed acquire logged %d times, want once per minute", n)
	}
}

// A key refused because it equals a custom backfill suffix names that
// suffix, not the default one.
func TestKeyErrorNamesTheCustomSuffix(t *testing.T) {
	err := checkKeySuffix("order", "Client", "tail", "tail")
	if !errors.Is(err, ErrReservedKey) {
		t.Fatalf("checkKeySuffix: %v, want ErrReservedKey", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"tail"`) || strings.Contains(msg, DefaultBackfillSuffix) {
		t.Errorf("message names the wrong suffix: %s", msg)
	}
}

// valueMsg has value receivers: calling them on a nil *valueMsg panics.
type valueMsg struct{ Client string }

func (valueMsg) StreamCategory() string          { return "vmsg" }
func (m valueMsg) PartitionKey() (string, error) { return Key("vmsg", "Client", m.Client) }

// Publishing a typed nil returns an error instead of panicking.
func TestPublishTypedNilIsAnError(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { c.Close() })
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Publish of a typed nil panicked: %v", p)
		}
	}()
	var m *valueMsg
	if err := NewPublisher(c).Publish(context.Background(), m); !errors.Is(err, ErrPublish) {
		t.Fatalf("Publish(typed nil): %v, want an error matching ErrPublish", err)
	}
}

// Status converts a partition's halt into a copy: changing a returned
// Halt leaves the worker's (whose own Status copies it too: package
// worker).
func TestStatusReturnsHaltCopies(t *testing.T) {
	in := worker.Status{Handler: "orders", Halted: true, Halt: &contract.Halt{Handler: "orders", Reason: "poison"}}
	ps := partitionStatus(in)
	if !ps.Halted || ps.Halt == nil || ps.Halt.Reason != "poison" {
		t.Fatalf("converted %+v", ps)
	}
	ps.Halt.Reason = "changed by the caller"
	if in.Halt.Reason != "poison" {
		t.Fatalf("the worker's halt changed through Status: reason %q", in.Halt.Reason)
	}
}
