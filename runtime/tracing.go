package runtime

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Tracing: the publisher writes the trace context of its ctx into the
// entry, as fields named by the propagator (W3C: "traceparent",
// "tracestate"; nothing when ctx carries no span). The engine starts a
// consumer span per handler attempt, "process <category>", linked to the
// publisher's span, with the handler, category, key and attempt as
// attributes; the handler's ctx carries it, so the handler's own spans are
// its children.

// newTracer is tp's tracer for the engine, or a no-op one.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	return tp.Tracer(meterName)
}

// startAttempt starts one handler attempt's span (when tracing) and its
// duration measurement; end records both with the attempt's error.
func (e *Engine) startAttempt(ctx context.Context, reg Registration, category string, en rdb.Entry, attempt int) (context.Context, func(error)) {
	start := time.Now()
	var span trace.Span
	if e.o.TracerProvider != nil {
		key := ""
		if li, ok := LeaseFromContext(ctx); ok {
			key = li.Key
		} else if corr, ok := Correlation(ctx); ok {
			key = corr // a pm that is not sequential
		}
		attrs := []attribute.KeyValue{
			attrSystem.String(systemName), attrOpName.String("process"), attrOpType.String("process"),
			attrDest.String(category), attrGroup.String(reg.Name),
			attrHandler.String(reg.Name), attrCategory.String(category), attrKey.String(key),
			attrAttempt.Int(attempt), attrStream.String(en.Stream), attrEntry.String(en.ID),
		}
		if id := en.Fields[rdb.FieldID]; id != "" {
			attrs = append(attrs, attrMsgID.String(id))
		}
		// A new root, linked to the publisher's span: a message may be
		// handled long after, and Run's ctx may carry the service's own
		// span, which must not parent every event's span.
		opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
		if pub := trace.SpanContextFromContext(e.o.Propagator.Extract(context.Background(), propagation.MapCarrier(en.Fields))); pub.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: pub}))
		}
		ctx, span = e.tracer.Start(ctx, "process "+category, opts...)
	}
	return ctx, func(err error) {
		errType := ""
		if err != nil {
			errType = errorType(err)
		}
		attrs := e.metrics.cached(attrsKey{"process", reg.Name, category, errType}, func() []attribute.KeyValue {
			attrs := []attribute.KeyValue{attrSystem.String(systemName), attrOpName.String("process"),
				attrDest.String(category), attrGroup.String(reg.Name)}
			if errType != "" {
				attrs = append(attrs, attrErrType.String(errType))
			}
			return attrs
		})
		e.metrics.process.Record(context.Background(), time.Since(start).Seconds(), attrs)
		if span != nil {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}
	}
}

// errorType is error.type of a failed attempt: the kind of failure the
// engine tells apart, else "error" (an error's text would make a series
// per message).
func errorType(err error) string {
	switch {
	case errors.Is(err, ErrHandlerTimeout):
		return "timeout"
	case errors.Is(err, ErrPermanent):
		return "permanent"
	case errors.Is(err, ErrHandlerPanic):
		return "panic"
	}
	return "error"
}
