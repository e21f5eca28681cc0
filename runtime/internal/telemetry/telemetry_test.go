package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The counters carry the handler (and seqby.events its category and
// outcome), and the durations their seconds, under the names the docs
// list.
func TestCounters(t *testing.T) {
	mr, mp := newReader(t)
	tm, err := New(Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tm.Event(ctx, "h", "order", OutcomeHandled)
	tm.Event(ctx, "h", "order", OutcomeHandled)
	tm.Event(ctx, "h", "order", OutcomeSkipped)
	tm.LeaseAcquired("h")
	tm.LeaseLost("h")
	tm.LeaseFenced("h")
	tm.PartitionResolved("h")
	tm.EntriesReclaimed("h", 3)
	tm.ReplicaShort()
	tm.RenewDuration(ctx, time.Millisecond)
	tm.DiscoveryDuration(ctx, "h", time.Millisecond)
	h := AttrHandler.String("h")
	for _, c := range []struct {
		name string
		want float64
		attr []attribute.KeyValue
	}{
		{"seqby.events", 2, []attribute.KeyValue{h, AttrCategory.String("order"), AttrOutcome.String(OutcomeHandled)}},
		{"seqby.events", 1, []attribute.KeyValue{h, AttrOutcome.String(OutcomeSkipped)}},
		{"seqby.lease.acquired", 1, []attribute.KeyValue{h}},
		{"seqby.lease.lost", 1, []attribute.KeyValue{h}},
		{"seqby.lease.fenced", 1, []attribute.KeyValue{h}},
		{"seqby.partitions.resolved", 1, []attribute.KeyValue{h}},
		{"seqby.entries.reclaimed", 3, []attribute.KeyValue{h}},
		{"seqby.replicas.short", 1, nil},
		{"seqby.lease.renew.duration", 1, nil},
		{"seqby.discovery.duration", 1, []attribute.KeyValue{h}},
	} {
		if v, _ := mr.Value(c.name, c.attr...); v != c.want {
			t.Errorf("%s %v: %v, want %v", c.name, c.attr, v, c.want)
		}
	}
}

// An attempt's span is a new root named after its category, linked to the
// publisher's span, with the attempt's attributes; a failure sets its
// status and the duration's error.type (errorType). Without a
// TracerProvider no span starts, but the duration is recorded.
func TestStartAttempt(t *testing.T) {
	mr, mp := newReader(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	prop := propagation.TraceContext{}
	tm, err := New(Config{MeterProvider: mp, TracerProvider: tp, Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}

	// The publisher's span, written into the entry's fields.
	pctx, pub := tp.Tracer("pub").Start(context.Background(), "publish")
	fields := propagation.MapCarrier{rdb.FieldID: "m1"}
	prop.Inject(pctx, fields)
	pub.End()
	// Run's ctx carries a span of its own, which must not parent it.
	rctx, run := tp.Tracer("svc").Start(context.Background(), "run")
	defer run.End()

	en := rdb.Entry{Stream: "order:{k1}", ID: "5-0", Fields: fields}
	ctx, end := tm.StartAttempt(rctx, "h", "order", "k1", en, 2)
	if !trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatal("the handler's ctx carries no span")
	}
	end(fmt.Errorf("boom: %w", contract.ErrHandlerTimeout))

	var got sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "process order" {
			got = s
		}
	}
	if got == nil {
		t.Fatalf("no span %q", "process order")
	}
	if got.Parent().IsValid() || got.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("parent %v, kind %v: want a consumer root", got.Parent(), got.SpanKind())
	}
	if links := got.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != pub.SpanContext().SpanID() {
		t.Errorf("links %v, want the publisher's span", links)
	}
	if got.Status().Code != codes.Error {
		t.Errorf("status %v, want an error", got.Status())
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range got.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	for k, v := range map[attribute.Key]attribute.Value{
		AttrSystem: attribute.StringValue("seqby"), AttrOpName: attribute.StringValue("process"),
		AttrOpType: attribute.StringValue("process"), AttrDest: attribute.StringValue("order"),
		AttrGroup: attribute.StringValue("h"), AttrHandler: attribute.StringValue("h"),
		AttrCategory: attribute.StringValue("order"), AttrKey: attribute.StringValue("k1"),
		AttrAttempt: attribute.IntValue(2), AttrStream: attribute.StringValue("order:{k1}"),
		AttrEntry: attribute.StringValue("5-0"), AttrMsgID: attribute.StringValue("m1"),
	} {
		if attrs[k] != v {
			t.Errorf("span attribute %s: %v, want %v", k, attrs[k].Emit(), v.Emit())
		}
	}
	if v, _ := mr.Value("messaging.process.duration", AttrGroup.String("h"), AttrErrType.String("timeout")); v != 1 {
		t.Errorf("failed attempts measured: %v, want 1", v)
	}

	// No tracer: no span, the duration still measured (no error.type).
	plain, err := New(Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	before := len(rec.Ended())
	ctx, end = plain.StartAttempt(context.Background(), "h", "order", "", en, 1)
	end(nil)
	if trace.SpanContextFromContext(ctx).IsValid() || len(rec.Ended()) != before {
		t.Error("a span started without a TracerProvider")
	}
	if v, _ := mr.Value("messaging.process.duration", AttrGroup.String("h")); v != 2 {
		t.Errorf("attempts measured: %v, want 2", v)
	}
}

// The gauges report the Snapshot: owned and paused counts and zeros per
// handler, each busy partition's lag and backlog (from Redis when its
// last read was full), the handlers' sums, the halt index's live records
// and the index sizes.
func TestGauges(t *testing.T) {
	s := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	// Five entries in the deep partition's stream, none read by group h;
	// one live halt record of h and one lapsed.
	for range 5 {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: "order:{deep}", Values: []string{"f", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.XGroupCreate(ctx, "order:{deep}", "h", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SAdd(ctx, rdb.MarksKey("h"), "halt:a", "halt:gone").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, "halt:a", rdb.MetaHalt, "1").Err(); err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	snap := Snapshot{
		Handlers: []string{"h", "idle"},
		Owned:    map[string]int{"h": 3},
		Paused:   map[string]int{"h": 1},
		Busy: []Work{
			{Handler: "h", Category: "order", Key: "deep", Lanes: []string{"order:{deep}", "order:{deep}:backfill"},
				Oldest: now.Add(-10 * time.Second).UnixMilli(), Backlog: 2, More: true},
			{Handler: "h", Category: "order", Key: "near", Lanes: []string{"order:{near}"},
				Oldest: now.Add(-4 * time.Second).UnixMilli(), Backlog: 3},
		},
		Index: map[string]int{"order": 7},
	}
	mr, mp := newReader(t)
	tm, err := New(Config{MeterProvider: mp, Client: c, Snapshot: func() Snapshot { return snap }})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tm.Observe()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()

	h, idle := AttrHandler.String("h"), AttrHandler.String("idle")
	for _, c := range []struct {
		name string
		want float64
		attr []attribute.KeyValue
	}{
		{"seqby.partitions.owned", 3, []attribute.KeyValue{h}},
		{"seqby.partitions.paused", 1, []attribute.KeyValue{h}},
		{"seqby.partitions.halted", 1, []attribute.KeyValue{h}},
		{"seqby.partitions.owned", 0, []attribute.KeyValue{idle}},
		{"seqby.handler.lag", 0, []attribute.KeyValue{idle}},
		{"seqby.partition.backlog", 5, []attribute.KeyValue{h, AttrCategory.String("order"), AttrKey.String("deep")}},
		{"seqby.partition.backlog", 3, []attribute.KeyValue{h, AttrKey.String("near")}},
		{"seqby.handler.backlog", 8, []attribute.KeyValue{h}},
		{"seqby.index.partitions", 7, []attribute.KeyValue{AttrCategory.String("order")}},
	} {
		if v, ok := mr.Value(c.name, c.attr...); !ok || v != c.want {
			t.Errorf("%s %v: %v (found %v), want %v", c.name, c.attr, v, ok, c.want)
		}
	}
	for _, c := range []struct {
		name string
		want float64
		attr []attribute.KeyValue
	}{
		{"seqby.partition.lag", 10, []attribute.KeyValue{h, AttrKey.String("deep")}},
		{"seqby.partition.lag", 4, []attribute.KeyValue{h, AttrKey.String("near")}},
		{"seqby.handler.lag", 10, []attribute.KeyValue{h}},
	} {
		if v, _ := mr.Value(c.name, c.attr...); math.Abs(v-c.want) > 2 {
			t.Errorf("%s %v: %v, want about %v", c.name, c.attr, v, c.want)
		}
	}
}

// A Lag holds the oldest entry's milliseconds (at least 1, so a set Lag
// never reads as none), the entries read, and whether more wait.
func TestLag(t *testing.T) {
	var l Lag
	if o, n, more := l.Load(); o != 0 || n != 0 || more {
		t.Fatalf("zero Lag: %d %d %v", o, n, more)
	}
	l.Set("1700000000123-4", 3, true)
	if o, n, more := l.Load(); o != 1700000000123 || n != 3 || !more {
		t.Fatalf("set: %d %d %v", o, n, more)
	}
	l.Set("0-1", 1, false)
	if o, _, _ := l.Load(); o != 1 {
		t.Fatalf("an id at 0 ms: %d, want 1", o)
	}
	l.Clear()
	if o, n, more := l.Load(); o != 0 || n != 0 || more {
		t.Fatalf("cleared: %d %d %v", o, n, more)
	}
}

// error.type names the kinds of failure the engine tells apart, wrapped
// or not, and nothing of an error's text.
func TestErrorType(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("after 1s: %w", contract.ErrHandlerTimeout), "timeout"},
		{contract.Permanent(errors.New("bad input")), "permanent"},
		{fmt.Errorf("recovered: %w", contract.ErrHandlerPanic), "panic"},
		{errors.New("connection refused"), "error"},
	} {
		if got := errorType(tt.err); got != tt.want {
			t.Errorf("errorType(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
