package runtime

import (
	"context"
	"errors"
	"slices"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// Tracing: the publisher writes the trace context of its ctx into the
// entry, as fields named by the propagator (W3C: "traceparent",
// "tracestate"; nothing when ctx carries no span). The engine starts a
// consumer span per handler attempt, "process <category>", linked to the
// publisher's span, with the handler, category, key and attempt as
// attributes (telemetry.Telemetry.StartAttempt); the handler's ctx
// carries it, so the handler's own spans are its children.

// snapshot is what the gauges report of e at one collection: the owned
// partitions, paused ones, those with work, and the index sizes.
func (e *Engine) snapshot() telemetry.Snapshot {
	s := telemetry.Snapshot{Owned: map[string]int{}, Paused: map[string]int{}}
	e.workers.Gauges(&s)
	e.mu.Lock()
	s.Handlers = slices.Clone(e.life.handlers)
	e.mu.Unlock()
	s.Index = e.disc.Index().Sizes()
	return s
}

// countSettled counts the outcome of an entry an owner settled.
func (e *Engine) countSettled(handler, category string, out executor.Outcome) {
	switch out {
	case executor.OutDone:
		e.telemetry.Event(context.Background(), handler, category, telemetry.OutcomeHandled)
	case executor.OutSkip:
		e.telemetry.Event(context.Background(), handler, category, telemetry.OutcomeSkipped)
	case executor.OutHalt:
		e.telemetry.Event(context.Background(), handler, category, telemetry.OutcomeFailed)
	}
}

// attemptKey is the key an attempt's span names: its partition's, or a
// pm's correlation value when the pm is not sequential.
func attemptKey(ctx context.Context) string {
	if li, ok := LeaseFromContext(ctx); ok {
		return li.Key
	} else if corr, ok := Correlation(ctx); ok {
		return corr
	}
	return ""
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
