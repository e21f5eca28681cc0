package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// StartAttempt starts attempt n (from 1) of handler on en, of category:
// its consumer span "process <category>" when tracing, and its duration
// measurement. ctx carries the span, so the handler's own spans are its
// children. end records both with the attempt's error (nil: success).
func (t *Telemetry) StartAttempt(ctx context.Context, handler, category string, en rdb.Entry, n int) (_ context.Context, end func(error)) {
	start := time.Now()
	var span trace.Span
	if t.tracer != nil {
		attrs := []attribute.KeyValue{
			AttrSystem.String(systemName), AttrOpName.String("process"), AttrOpType.String("process"),
			AttrDest.String(category), AttrGroup.String(handler),
			AttrHandler.String(handler), AttrCategory.String(category), AttrKey.String(t.cfg.AttemptKey(ctx)),
			AttrAttempt.Int(n), AttrStream.String(en.Stream), AttrEntry.String(en.ID),
		}
		if id := en.Fields[rdb.FieldID]; id != "" {
			attrs = append(attrs, AttrMsgID.String(id))
		}
		// A new root, linked to the publisher's span: a message may be
		// handled long after, and Run's ctx may carry the service's own
		// span, which must not parent every event's span.
		opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
		if pub := trace.SpanContextFromContext(t.cfg.Propagator.Extract(context.Background(), propagation.MapCarrier(en.Fields))); pub.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: pub}))
		}
		ctx, span = t.tracer.Start(ctx, "process "+category, opts...)
	}
	return ctx, func(err error) {
		errType := ""
		if err != nil {
			errType = t.cfg.ErrorType(err)
		}
		attrs := t.cached(attrsKey{"process", handler, category, errType}, func() []attribute.KeyValue {
			attrs := []attribute.KeyValue{AttrSystem.String(systemName), AttrOpName.String("process"),
				AttrDest.String(category), AttrGroup.String(handler)}
			if errType != "" {
				attrs = append(attrs, AttrErrType.String(errType))
			}
			return attrs
		})
		t.process.Record(context.Background(), time.Since(start).Seconds(), attrs)
		if span != nil {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}
	}
}
