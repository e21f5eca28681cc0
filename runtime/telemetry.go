package runtime

import (
	"slices"

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
