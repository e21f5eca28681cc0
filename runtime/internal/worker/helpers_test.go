package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/wake"
)

// newRedis starts a private redis-server for the test and returns a client.
var newRedis = redistest.NewClient

// ctxT is a context for a test's Redis calls.
var ctxT = redistest.Context

// newSet returns a Set of owner on c with the engine's test timings and
// LeaseTTL ttl, logging to logs.
func newSet(t *testing.T, c redis.UniversalClient, owner string, ttl time.Duration, logs *logsink.Buffer) *Set {
	t.Helper()
	if err := rdb.LoadScripts(ctxT(t), c); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(logs, nil))
	batch := rdb.NewBatcher(c)
	w := wake.New(wake.Config{Client: c, Block: 100 * time.Millisecond})
	x := executor.New(executor.Config{Log: log, Owner: owner, Concurrency: 2})
	inc := membership.NewIncarnation(owner)
	ls := lease.New(lease.Config{Client: c, Batch: batch, Wake: w, Slots: x.Slots(), Log: log, Incarnation: inc,
		LeaseTTL: ttl, LeaseMargin: ttl / 10, HeartbeatInterval: ttl / 5, VerifyBound: lease.DefaultVerifyBound,
		RetryBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	return New(Config{Client: c, Batch: batch, Wake: w, Exec: x, Leases: ls, Log: log,
		Members: membership.New(membership.Config{Client: c, Owner: owner, Incarnation: inc, LeaseTTL: ttl}),
		Trim:    func(context.Context, string, *Trims, []string, []string) {},
		Options: Options{Owner: owner, LeaseTTL: ttl, HeartbeatInterval: ttl / 5, RetryBackoff: 10 * time.Millisecond,
			MaxBackoff: 50 * time.Millisecond, VerifyBound: lease.DefaultVerifyBound, ReadAhead: 1, BackfillSuffix: "backfill",
			PermanentErrors: 5, FaultBench: time.Minute}})
}

// testWorker builds a Set logging to a buffer and an owned partition of
// key a on category order for handler orders, whose lease was acquired
// at acquiredAt, without running it.
func testWorker(t *testing.T, leaseTTL time.Duration, acquiredAt time.Time) (redis.UniversalClient, *Set, *Worker, *logsink.Buffer) {
	t.Helper()
	c, ctx := newRedis(t), ctxT(t)
	logs := &logsink.Buffer{}
	s := newSet(t, c, "p1", leaseTTL, logs)
	l, err := rdb.Acquire(ctx, c, rdb.PartitionLease(rdb.PartitionStream("order", "a"), "orders"), "p1", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	w := s.Keyed(ctx, Handler{Name: "orders"}, "order", "a", l, acquiredAt)
	s.Add(w)
	return c, s, w, logs
}

// xadd appends an entry with an explicit id, so tests fix the order of
// entries across streams.
func xadd(t *testing.T, c *redis.Client, stream, id, note string) {
	t.Helper()
	if err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, ID: id, Values: []any{"n", note}}).Err(); err != nil {
		t.Fatal(err)
	}
}
