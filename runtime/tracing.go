package runtime

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing: the publisher writes the trace context of its ctx into the
// entry, as fields named by the propagator (W3C: "traceparent",
// "tracestate"; nothing when ctx carries no span). The engine starts a
// consumer span per handler attempt, "process <category>", linked to the
// publisher's span, with the handler, category, key and attempt as
// attributes (telemetry.Telemetry.StartAttempt); the handler's ctx
// carries it, so the handler's own spans are its children.

// traceContext is the trace context of ctx as prop writes it into an
// entry's fields (Record.fields leaves out any name the entry uses
// itself); nil when ctx carries no span, to keep the entry small.
func traceContext(ctx context.Context, prop propagation.TextMapPropagator) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	prop.Inject(ctx, carrier)
	return carrier
}
