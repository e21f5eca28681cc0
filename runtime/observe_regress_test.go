package runtime

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// Regressions found by a review of the metrics, tracing and health work.

// Discovery fails on every cycle (the category's index holds a string):
// the engine must not say it is ready.
func TestHealthNotReadyWithoutADiscovery(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if err := c.Set(ctx, rdb.IndexKey("order"), "not a set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := startEngine(t, c, fastOptions("health-nodisc"), keyedHandler("rh", func(context.Context, *testEvent) error { return nil }))
	eventually(t, 5*time.Second, "consuming", func() bool { return r.Status().Consuming })
	h := r.Health(ctx)
	if h.Ready || !strings.Contains(strings.Join(h.Reasons, "\n"), "discovery") {
		t.Fatalf("discovery never succeeded, yet %+v", h)
	}
}

// A stale owner's fenced RecordHalt leaves an index member without a
// record: nothing is halted, and the gauge must say 0.
func TestHaltedGaugeCountsRecordsOnly(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	mr, mp := newMetricsReader(t)
	opts := fastOptions("halted-gauge")
	opts.MeterProvider = mp
	r := startEngine(t, c, opts, keyedHandler("rg", func(context.Context, *testEvent) error { return nil }))
	eventually(t, 5*time.Second, "consuming", func() bool { return r.Status().Consuming })
	stream := rdb.PartitionStream("order", "k")
	ref := rdb.PartitionLease(stream, "rg")
	if _, err := rdb.Acquire(ctx, c, ref, "new-owner", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	stale := rdb.Lease{Ref: ref, Owner: "old-owner", Generation: 1}
	if _, err := rdb.RecordHalt(ctx, c, stale, rdb.HaltRecord{Handler: "rg", Partition: stream, Key: "k", Stream: stream, EntryID: "1-0"}); err == nil {
		t.Fatal("a stale owner's RecordHalt was not fenced")
	}
	if n, _ := c.SCard(ctx, rdb.MarksKey("rg")).Result(); n != 1 {
		t.Fatalf("precondition: the halt index holds %d members, want the 1 left by the fenced call", n)
	}
	if v, _ := mr.Value("seqby.partitions.halted", telemetry.AttrHandler.String("rg")); v != 0 {
		t.Errorf("seqby.partitions.halted = %v with no halt record in Redis", v)
	}
}

// Run's ctx carries a span: the consumer spans must still be roots,
// linked to the publisher's span, not children of the service's.
func TestConsumerSpanIsARoot(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	if err := NewPublisher(c).Publish(ctx, ev("k", 1)); err != nil {
		t.Fatal(err)
	}
	got := make(chan trace.SpanContext, 1)
	opts := fastOptions("span-root")
	opts.TracerProvider = tp
	e, err := NewEngine(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(keyedHandler("rt", func(ctx context.Context, _ *testEvent) error {
		got <- trace.SpanContextFromContext(ctx)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	runCtx, main := tp.Tracer("app").Start(context.Background(), "service main")
	defer main.End()
	runCtx, cancel := context.WithCancel(runCtx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	var sc trace.SpanContext
	select {
	case sc = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
	if sc.TraceID() == main.SpanContext().TraceID() {
		t.Fatalf("the consumer span is in the trace of Run's ctx (%v): it must be a new root", sc.TraceID())
	}
}

// Redis hangs (SIGSTOP): the liveness answer must not wait on it, and
// Health must answer within about its one-second bound.
func TestLivenessDoesNotWaitForRedis(t *testing.T) {
	s := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr}) // defaults, as a service would
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	opts := fastOptions("live-nowait")
	opts.LeaseTTL, opts.HeartbeatInterval, opts.LeaseMargin = 15*time.Second, 3*time.Second, 1500*time.Millisecond
	r := startEngine(t, c, opts, keyedHandler("rl", func(context.Context, *testEvent) error { return nil }))
	eventually(t, 10*time.Second, "ready", func() bool { return r.Health(ctx).Ready })
	srv := httptest.NewServer(r.HealthHandler())
	t.Cleanup(srv.Close)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	probe := &http.Client{Timeout: 2 * time.Second}
	resp, err := probe.Get(srv.URL + "/healthz?live")
	if err != nil {
		t.Fatalf("liveness probe with Redis hung: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("liveness with Redis hung: %d, want 200", resp.StatusCode)
	}
	resp, err = probe.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatalf("readiness probe with Redis hung: %v (Health must answer within its bound)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readiness with Redis hung: %d, want 503", resp.StatusCode)
	}
}

// A sequential pm's busy partition names its categories.
func TestPMLagCategory(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	mr, mp := newMetricsReader(t)
	block := make(chan struct{})
	pm := flowPM("rpm", func(ctx context.Context, _, _ string, _ *pmPayment) error {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return nil
	})
	if err := NewPublisher(c).Publish(ctx, &pmOrder{OrderID: "o1", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	opts := fastOptions("pm-lag")
	opts.MeterProvider = mp
	startEngine(t, c, opts, pm)
	t.Cleanup(func() { close(block) })
	eventually(t, 10*time.Second, "a lag series", func() bool {
		_, ok := mr.Value("seqby.partition.lag", telemetry.AttrHandler.String("rpm"))
		return ok
	})
	if _, ok := mr.Value("seqby.partition.lag", telemetry.AttrHandler.String("rpm"), telemetry.AttrCategory.String("")); ok {
		t.Errorf("the pm's lag series carries seqby.category=\"\"")
	}
}
