package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// countingPublisher counts the publishes of each message id.
type countingPublisher struct {
	p  *runtime.Publisher
	mu sync.Mutex
	n  map[string]int
}

func (c *countingPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r.MessageID]++
	c.mu.Unlock()
	return c.p.PublishRecord(ctx, r)
}

func (c *countingPublisher) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.n {
		n += k
	}
	return n
}

func (c *countingPublisher) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// TestRelayPerKeyOrder: records of interleaved keys, added in separate
// business transactions, reach each key's stream once each and in order,
// across many small batches published concurrently; unpartitioned
// records reach their category's stream in order.
func TestRelayPerKeyOrder(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		keys := []string{"c-1", "c-2", "c-3", "c-4"}
		const n = 25
		for i := 1; i <= n; i++ {
			for _, k := range keys {
				if err := e.placeOrder(ctx, fmt.Sprintf("%s-%d", k, i), &placed{Client: k, Seq: i}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.ob.Add(ctx, e.db, &note{Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
		e.relay(t, e.pub, outbox.RelayOptions{BatchSize: 7, Concurrency: 3})
		eventually(t, 20*time.Second, "every record published", func() bool { return e.pending(t) == 0 })
		for _, k := range keys {
			if got := seqs(e.stream(t, "order:{"+k+"}")); !slices.Equal(got, upTo(n)) {
				t.Errorf("stream of %s: %v, want 1..%d in order, once each", k, got, n)
			}
		}
		if got := seqs(e.stream(t, "note")); !slices.Equal(got, upTo(n)) {
			t.Errorf("note stream: %v, want 1..%d in order", got, n)
		}
		if got, want := e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = 'PUBLISHED' AND published_at IS NOT NULL`), n*(len(keys)+1); got != want {
			t.Errorf("%d records PUBLISHED, want %d", got, want)
		}
		// Records added while it runs are published too (a NOTIFY wakes
		// the PostgreSQL relay; SQLite's polls).
		if err := e.placeOrder(ctx, "late", &placed{Client: "c-1", Seq: n + 1}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the late record published", func() bool { return len(e.stream(t, "order:{c-1}")) == n+1 })
	})
}

// insertRaw inserts a record by hand, as older code or an operator might.
func (e *env) insertRaw(t *testing.T, msgID, category, key string, partitioned bool, typ string, seq int) {
	t.Helper()
	_, err := e.db.ExecContext(context.Background(), e.q(`INSERT INTO seqby_outbox
(message_id, category, partition_key, partitioned, backfill, type, payload) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		msgID, category, key, partitioned, false, typ, []byte(fmt.Sprintf(`{"client":%q,"seq":%d}`, key, seq)))
	if err != nil {
		t.Fatal(err)
	}
}

// TestAbandonedBackstop: records inserted by hand with a key (or a
// category) that can never be published are marked ABANDONED with the
// reason at once, never retried, listed for operators, and every record
// behind them flows: the same partition's good records, other keys', and
// even the bad key's later records (abandoned in turn).
func TestAbandonedBackstop(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.insertRaw(t, "good-1", "order", "c-1", true, "placed", 1)
		e.insertRaw(t, "bad-1", "order", "bad{key}", true, "placed", 1)
		e.insertRaw(t, "bad-2", "order", "", true, "placed", 1)
		e.insertRaw(t, "bad-3", "", "c-1", true, "placed", 2)
		e.insertRaw(t, "good-2", "order", "c-1", true, "placed", 2)
		e.insertRaw(t, "bad-4", "order", "bad{key}", true, "placed", 2)
		e.insertRaw(t, "good-3", "order", "c-2", true, "placed", 1)
		e.insertRaw(t, "good-4", "order", "c-1", true, "placed", 3)
		reader := sdkmetric.NewManualReader()
		cp := &countingPublisher{p: e.pub}
		e.relay(t, cp, outbox.RelayOptions{BatchSize: 3, Concurrency: 2,
			MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
		eventually(t, 20*time.Second, "no record pending", func() bool { return e.pending(t) == 0 })
		if got := seqs(e.stream(t, "order:{c-1}")); !slices.Equal(got, []int{1, 2, 3}) {
			t.Errorf("c-1 stream %v, want [1 2 3]: the abandoned records must not hold it", got)
		}
		if got := seqs(e.stream(t, "order:{c-2}")); !slices.Equal(got, []int{1}) {
			t.Errorf("c-2 stream %v, want [1]", got)
		}
		ab, err := e.ob.Abandoned(ctx, e.db, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range ab {
			ids = append(ids, a.MessageID)
			if a.Reason == "" || a.CreatedAt.IsZero() || a.AbandonedAt.IsZero() || a.Type != "placed" {
				t.Errorf("abandoned record %+v: missing reason, times or type", a)
			}
		}
		if !slices.Equal(ids, []string{"bad-1", "bad-2", "bad-3", "bad-4"}) {
			t.Fatalf("abandoned %v, want bad-1..4 in order", ids)
		}
		if r := ab[0].Reason; !strings.Contains(r, "bad{key}") {
			t.Errorf("bad-1's reason %q does not name its key", r)
		}
		if ab[0].Key != "bad{key}" || ab[0].Category != "order" {
			t.Errorf("bad-1 listed as %+v", ab[0])
		}
		// Never retried: more rounds run (a new record goes through), and
		// each abandoned record was tried exactly once.
		if err := e.placeOrder(ctx, "after", &placed{Client: "c-2", Seq: 2}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the next record published", func() bool { return len(e.stream(t, "order:{c-2}")) == 2 })
		for _, id := range ids {
			if n := cp.count(id); n != 1 {
				t.Errorf("%s published %d times, want once and never again", id, n)
			}
		}
		if n := e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = 'ABANDONED'`); n != 4 {
			t.Errorf("%d ABANDONED, want 4", n)
		}
		// The counters follow the marks (a moment after the stream).
		eventually(t, 10*time.Second, "seqby.outbox.published to count good-1..4 and after", func() bool {
			return counter(t, reader, "seqby.outbox.published") == 5
		})
		if got := counter(t, reader, "seqby.outbox.abandoned"); got != 4 {
			t.Errorf("seqby.outbox.abandoned = %d, want 4", got)
		}
		st, err := e.ob.Stats(ctx, e.db)
		if err != nil || st.Abandoned != 4 || st.Pending != 0 {
			t.Errorf("stats %+v, %v", st, err)
		}
		// The backlog operators alert on: a gauge, read as Stats reads it.
		if got := counter(t, reader, "seqby.outbox.abandoned.records"); got != 4 {
			t.Errorf("seqby.outbox.abandoned.records = %d, want 4", got)
		}
		// Operators delete them once dealt with; nothing else does.
		n, err := e.ob.DeleteAbandoned(ctx, e.db, ab[0].Seq, ab[1].Seq)
		if err != nil || n != 2 {
			t.Fatalf("DeleteAbandoned: %d, %v", n, err)
		}
		if left, _ := e.ob.Abandoned(ctx, e.db, 10); len(left) != 2 || left[0].MessageID != "bad-3" {
			t.Errorf("left abandoned: %+v", left)
		}
	})
}

// counter sums an Int64 counter's data points.
func counter(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sum += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					sum += p.Value
				}
			}
		}
	}
	return sum
}

// gaugeF reads a float gauge (-1 when absent).
func gaugeF(t *testing.T, reader *sdkmetric.ManualReader, name string) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == name && len(g.DataPoints) > 0 {
				return g.DataPoints[0].Value
			}
		}
	}
	return -1
}

// failingPublisher fails every publish.
type failingPublisher struct{}

func (failingPublisher) PublishRecord(context.Context, runtime.Record) error {
	return fmt.Errorf("redis down: %w", runtime.ErrPublish)
}

// TestMetricsPendingAndLag: while records cannot be published the
// pending gauge counts them and the lag gauge reports the oldest one's
// age; once published, both drop to 0.
func TestMetricsPendingAndLag(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		for i := 1; i <= 3; i++ {
			if err := e.placeOrder(ctx, fmt.Sprint(i), &placed{Client: "c-1", Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
		// Backdate the oldest, so its age is known to be at least 1h.
		old := time.Now().Add(-time.Hour).UnixMilli()
		setTime(t, e, "created_at", old, `message_id = (SELECT message_id FROM seqby_outbox ORDER BY seq LIMIT 1)`)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		logs := &syncBuffer{}
		_, stop := e.startRelay(t, failingPublisher{}, outbox.RelayOptions{MeterProvider: mp, LagWarning: 30 * time.Minute,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		eventually(t, 10*time.Second, "the pending gauge", func() bool { return counter(t, reader, "seqby.outbox.pending") == 3 })
		if lag := gaugeF(t, reader, "seqby.outbox.lag"); lag < 3600 {
			t.Errorf("lag %v s, want at least the backdated record's hour", lag)
		}
		// The relay also says it is behind (the lag is over LagWarning),
		// and why.
		eventually(t, 20*time.Second, "the lag warning", func() bool {
			return strings.Contains(logs.String(), "the relay is behind") && strings.Contains(logs.String(), "publish failed")
		})
		stop()
		e.relay(t, e.pub, outbox.RelayOptions{MeterProvider: mp})
		eventually(t, 10*time.Second, "every record published", func() bool { return e.pending(t) == 0 })
		if got := counter(t, reader, "seqby.outbox.pending"); got != 0 {
			t.Errorf("pending gauge %d with nothing pending, want 0", got)
		}
		if lag := gaugeF(t, reader, "seqby.outbox.lag"); lag != 0 {
			t.Errorf("lag %v with nothing pending, want 0", lag)
		}
		if got := seqs(e.stream(t, "order:{c-1}")); !slices.Equal(got, []int{1, 2, 3}) {
			t.Errorf("stream %v after the failures, want [1 2 3]", got)
		}
	})
}

// setTime sets a timestamp column (ms since the epoch) of the records
// matching where.
func setTime(t *testing.T, e *env, col string, ms int64, where string) {
	t.Helper()
	val := "?"
	if e.d == outbox.Postgres {
		val = "to_timestamp(?::bigint / 1000.0)"
	}
	if _, err := e.db.ExecContext(context.Background(), e.q(`UPDATE seqby_outbox SET `+col+` = `+val+` WHERE `+where), ms); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionDeletesOnlyOldPublished: cleanup deletes PUBLISHED
// records older than the retention, and keeps newer published ones,
// pending ones and abandoned ones however old.
func TestRetentionDeletesOnlyOldPublished(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		for i := 1; i <= 4; i++ {
			if err := e.placeOrder(ctx, fmt.Sprint(i), &placed{Client: "c-1", Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
		e.insertRaw(t, "bad", "order", "bad{key}", true, "placed", 1)
		_, stop := e.startRelay(t, e.pub, outbox.RelayOptions{Retention: -1})
		eventually(t, 10*time.Second, "all published", func() bool { return e.pending(t) == 0 })
		stop()
		old := time.Now().Add(-48 * time.Hour).UnixMilli()
		setTime(t, e, "published_at", old, `seq IN (SELECT seq FROM seqby_outbox WHERE status = 'PUBLISHED' ORDER BY seq LIMIT 2)`)
		setTime(t, e, "published_at", old, `status = 'ABANDONED'`)
		setTime(t, e, "created_at", old, `status = 'ABANDONED'`)
		if err := e.placeOrder(ctx, "5", &placed{Client: "c-9", Seq: 5}); err != nil { // pending, no relay
			t.Fatal(err)
		}
		setTime(t, e, "created_at", old, `status = 'PENDING'`)
		r := outbox.NewRelay(e.db, e.pub, outbox.RelayOptions{Dialect: e.d, Retention: 24 * time.Hour, Logger: testLogger(t)})
		n, err := r.Cleanup(ctx)
		if err != nil || n != 2 {
			t.Fatalf("Cleanup deleted %d, %v; want the 2 old published", n, err)
		}
		byStatus := func(s string) int {
			return e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = ?`, s)
		}
		if p, a, q := byStatus("PUBLISHED"), byStatus("ABANDONED"), byStatus("PENDING"); p != 2 || a != 1 || q != 1 {
			t.Fatalf("left %d published, %d abandoned, %d pending; want 2, 1, 1", p, a, q)
		}
		if e.count(t, `SELECT count(*) FROM seqby_outbox WHERE message_id IN (SELECT message_id FROM seqby_outbox WHERE status = 'PUBLISHED') AND seq <= 2`) != 0 {
			t.Fatal("the oldest published records survived")
		}
		// The running relay cleans up on its own every CleanupInterval.
		setTime(t, e, "published_at", old, `status = 'PUBLISHED'`)
		e.relay(t, e.pub, outbox.RelayOptions{Retention: 24 * time.Hour, CleanupInterval: 50 * time.Millisecond})
		eventually(t, 10*time.Second, "the relay's cleanup", func() bool { return byStatus("PUBLISHED") == 1 }) // c-9's, just published
		if byStatus("ABANDONED") != 1 {
			t.Fatal("the relay's cleanup deleted an abandoned record")
		}
	})
}

// syncBuffer is a log sink tests read while goroutines write to it.
type syncBuffer = logsink.Buffer

// TestSingleConnectionPool: with a pool of one connection (as an
// in-memory SQLite needs) Add in a transaction and the relay share it:
// the PostgreSQL relay polls instead of holding the only connection for
// LISTEN.
func TestSingleConnectionPool(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		db, err := sql.Open(e.driver, e.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		ctx := context.Background()
		r := outbox.NewRelay(db, e.pub, outbox.RelayOptions{Dialect: e.d, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		for i := 1; i <= 5; i++ {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.ob.Add(ctx, tx, &placed{Client: "c-1", Seq: i}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 10*time.Second, "every record published", func() bool { return len(e.stream(t, "order:{c-1}")) == 5 })
		if got := seqs(e.stream(t, "order:{c-1}")); !slices.Equal(got, upTo(5)) {
			t.Errorf("stream %v", got)
		}
	})
}
