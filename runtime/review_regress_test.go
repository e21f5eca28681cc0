package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// logBuffer collects an engine's logs; engine goroutines write to it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testPartition builds an engine logging to a buffer and an owned
// partition of key a on category order, without running it.
func testPartition(t *testing.T, leaseTTL time.Duration, acquiredAt time.Time) (*Engine, *partition, *logBuffer) {
	t.Helper()
	c, ctx := newRedis(t), ctxT(t)
	logs := &logBuffer{}
	opts := fastOptions("p1")
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	e, err := NewEngine(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := keyedHandler("orders", func(context.Context, *testEvent) error { return nil })
	l, err := rdb.Acquire(ctx, c, rdb.PartitionLease(rdb.PartitionStream("order", "a"), "orders"), "p1", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	p := e.newPartition(ctx, consumer{reg: reg, category: "order", mode: modeLeased}, "a", l, acquiredAt)
	e.mu.Lock()
	e.parts[p.id] = p
	e.mu.Unlock()
	return e, p, logs
}

// A lease counted lost by the local deadline alone may still hold the
// owner's token in Redis; finish releases it (compare-and-delete) so the
// next owner need not wait for the TTL.
func TestDeadlineLostLeaseIsReleased(t *testing.T) {
	e, p, _ := testPartition(t, time.Minute, time.Now().Add(-time.Hour))
	<-p.held.Context().Done() // the deadline is long past: the timer fires at once
	p.finish()
	ctx := ctxT(t)
	if v, err := e.c.Get(ctx, p.held.Lease().Ref.Key).Result(); err == nil {
		t.Fatalf("lease %s still holds %q after finish; the successor waits a full TTL", p.held.Lease().Ref.Key, v)
	}
}

// xadd appends an entry with an explicit id, so tests fix the order of
// entries across streams.
func xadd(t *testing.T, c *redis.Client, stream, id, note string) {
	t.Helper()
	if err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, ID: id, Values: []any{"n", note}}).Err(); err != nil {
		t.Fatal(err)
	}
}

// A keyed owner crashes while handling a backfill entry B; a primary entry
// P arrives; the next owner must re-run B before applying P.
func TestReclaimedBackfillHeadReadFirst(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lanes := []string{"order:{a}", "order:{a}:backfill"}
	ref := rdb.PartitionLease("order:{a}", "g")
	xadd(t, c, lanes[1], "1-1", "B")
	old, _ := rdb.Acquire(ctx, c, ref, "old", time.Minute)
	if _, err := rdb.Reclaim(ctx, c, old, "g", lanes); err != nil {
		t.Fatal(err)
	}
	en, ok, err := rdb.FencedRead(ctx, c, old, "g", lanes, nil)
	if !ok || err != nil || en.ID != "1-1" {
		t.Fatalf("old owner's read: %v %v %v", en, ok, err)
	}
	c.Del(ctx, ref.Key) // old crashes; its lease expires
	xadd(t, c, lanes[0], "2-1", "P")
	nw, _ := rdb.Acquire(ctx, c, ref, "new", time.Minute)
	if n, err := rdb.Reclaim(ctx, c, nw, "g", lanes); err != nil || n != 1 {
		t.Fatalf("reclaim: %d %v", n, err)
	}
	en, ok, err = rdb.FencedRead(ctx, c, nw, "g", lanes, nil)
	if !ok || err != nil || en.ID != "1-1" || en.Stream != lanes[1] {
		t.Fatalf("new owner read %s %s first (%v %v); want the reclaimed backfill head 1-1", en.Stream, en.ID, ok, err)
	}
}

// The same for a sequential pm: the in-flight backfill head of a crashed
// owner comes before a newer primary entry.
func TestPMReclaimedBackfillHeadReadFirst(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lanes := []string{"order:{x}", "payment:{x}", "order:{x}:backfill", "payment:{x}:backfill"}
	ref := rdb.PMLease("flow", "x", nil)
	xadd(t, c, lanes[3], "1-1", "B")
	old, _ := rdb.Acquire(ctx, c, ref, "old", time.Minute)
	if _, err := rdb.Reclaim(ctx, c, old, "flow", lanes); err != nil {
		t.Fatal(err)
	}
	en, ok, err := rdb.FencedReadOldest(ctx, c, old, "flow", lanes, 2, nil)
	if !ok || err != nil || en.ID != "1-1" {
		t.Fatalf("old owner's read: %v %v %v", en, ok, err)
	}
	c.Del(ctx, ref.Key)
	xadd(t, c, lanes[0], "2-1", "P")
	nw, _ := rdb.Acquire(ctx, c, ref, "new", time.Minute)
	if n, err := rdb.Reclaim(ctx, c, nw, "flow", lanes); err != nil || n != 1 {
		t.Fatalf("reclaim: %d %v", n, err)
	}
	en, ok, err = rdb.FencedReadOldest(ctx, c, nw, "flow", lanes, 2, nil)
	if !ok || err != nil || en.ID != "1-1" || en.Stream != lanes[3] {
		t.Fatalf("new owner read %s %s first (%v %v); want the reclaimed backfill head 1-1", en.Stream, en.ID, ok, err)
	}
}

// A pm applies the oldest entry across its streams, and looking at a
// stream's next entry does not deliver it: only the returned entry is
// ever pending, so "pending first" never puts a newer entry first.
func TestPMReadOldestDeliversOnlyWhatItReturns(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lanes := []string{"order:{x}", "payment:{x}", "order:{x}:backfill", "payment:{x}:backfill"}
	xadd(t, c, lanes[1], "1-1", "Q1")
	xadd(t, c, lanes[1], "2-1", "Q2")
	xadd(t, c, lanes[0], "3-1", "P1")
	xadd(t, c, lanes[2], "4-1", "B1")
	l, _ := rdb.Acquire(ctx, c, rdb.PMLease("flow", "x", nil), "o", time.Minute)
	if _, err := rdb.Reclaim(ctx, c, l, "flow", lanes); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 5 {
		en, ok, err := rdb.FencedReadOldest(ctx, c, l, "flow", lanes, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, en.Fields["n"])
		for _, s := range lanes {
			if s == en.Stream {
				continue
			}
			if p, _ := c.XPending(ctx, s, "flow").Result(); p != nil && p.Count > 0 {
				t.Fatalf("after reading %s, %s has %d pending entries it never returned", en.ID, s, p.Count)
			}
		}
		if err := rdb.FencedAck(ctx, c, l, "flow", en.Stream, en.ID); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[Q1 Q2 P1 B1]" {
		t.Fatalf("applied %v, want [Q1 Q2 P1 B1]", got)
	}
}

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
}

// A lease acquire that fails for another reason than "held by another
// owner" leaves the partition unowned: it is logged (once, rate-limited),
// never swallowed.
func TestFailedAcquireIsLogged(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := rdb.PartitionStream("order", "a")
	// A generation counter that is not an integer makes every acquire fail.
	if err := c.Set(ctx, rdb.GenerationKey(stream, "orders"), "not-a-number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
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

// Status returns copies: changing a returned Halt leaves the engine's.
func TestStatusReturnsHaltCopies(t *testing.T) {
	e, p, _ := testPartition(t, time.Minute, time.Now())
	p.mu.Lock()
	p.halt = &Halt{Handler: "orders", Reason: "poison"}
	p.mu.Unlock()
	s := e.Status()
	if len(s.Halted()) != 1 {
		t.Fatalf("status: %+v", s)
	}
	s.Halted()[0].Halt.Reason = "changed by the caller"
	if got := e.Status().Halted()[0].Halt.Reason; got != "poison" {
		t.Fatalf("the engine's halt changed through Status: reason %q", got)
	}
}
