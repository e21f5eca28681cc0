package runtime

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// TestTracePropagatesFromPublishToHandler: the publisher writes the trace
// context of its ctx into the entry; the engine's span for the handler
// attempt links to it, carries the handler, category, key and attempt,
// and is the span in the handler's ctx.
func TestTracePropagatesFromPublishToHandler(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	pctx, pub := tp.Tracer("test").Start(ctx, "place order")
	if err := NewPublisher(c).Publish(pctx, ev("k", 1)); err != nil {
		t.Fatal(err)
	}
	pub.End()
	es, err := c.XRange(ctx, "order:{k}", "-", "+").Result()
	if err != nil || len(es) != 1 {
		t.Fatalf("XRANGE: %v %v", es, err)
	}
	if tp, _ := es[0].Values["traceparent"].(string); tp == "" {
		t.Fatalf("entry fields %v: no traceparent", es[0].Values)
	}

	inHandler := make(chan trace.SpanContext, 1)
	h := keyedHandler("traced", func(ctx context.Context, e *testEvent) error {
		inHandler <- trace.SpanContextFromContext(ctx)
		return nil
	})
	opts := fastOptions("trace-1")
	opts.TracerProvider = tp
	startEngine(t, c, opts, h)
	var sc trace.SpanContext
	select {
	case sc = <-inHandler:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
	var span sdktrace.ReadOnlySpan
	eventually(t, 5*time.Second, "the handler span to end", func() bool {
		for _, s := range rec.Ended() {
			if s.SpanContext().SpanID() == sc.SpanID() {
				span = s
				return true
			}
		}
		return false
	})
	if span.Name() != "process order" || span.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("span %q kind %v, want \"process order\" consumer", span.Name(), span.SpanKind())
	}
	if l := span.Links(); len(l) != 1 || l[0].SpanContext.TraceID() != pub.SpanContext().TraceID() ||
		l[0].SpanContext.SpanID() != pub.SpanContext().SpanID() {
		t.Errorf("links %+v, want one to the publisher's span %v", l, pub.SpanContext())
	}
	want := map[attribute.Key]attribute.Value{
		telemetry.AttrHandler: attribute.StringValue("traced"), telemetry.AttrCategory: attribute.StringValue("order"),
		telemetry.AttrKey: attribute.StringValue("k"), telemetry.AttrAttempt: attribute.IntValue(1),
		telemetry.AttrSystem: attribute.StringValue("seqby"),
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range span.Attributes() {
		got[kv.Key] = kv.Value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %v, want %v", k, got[k].Emit(), v.Emit())
		}
	}
}

// TestPublishWithoutSpanWritesNoTraceFields keeps untraced entries as
// small as before.
func TestPublishWithoutSpanWritesNoTraceFields(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if err := NewPublisher(c).Publish(ctx, ev("k", 1)); err != nil {
		t.Fatal(err)
	}
	es, err := c.XRange(ctx, "order:{k}", "-", "+").Result()
	if err != nil || len(es) != 1 {
		t.Fatalf("XRANGE: %v %v", es, err)
	}
	if _, ok := es[0].Values["traceparent"]; ok {
		t.Errorf("entry fields %v: a traceparent without a span", es[0].Values)
	}
}
