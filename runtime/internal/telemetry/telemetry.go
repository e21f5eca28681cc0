package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// scopeName is the instrumentation scope of the engine's instruments and
// tracer: the engine's package, as before the package split.
const scopeName = "github.com/seqby/seqby/runtime"

// Attribute keys of the engine's metrics and spans.
const (
	AttrHandler  = attribute.Key("seqby.handler")                 // the handler's name
	AttrCategory = attribute.Key("seqby.category")                // the category (a pm's: its categories, comma-separated)
	AttrKey      = attribute.Key("seqby.key")                     // the partition key
	AttrOutcome  = attribute.Key("seqby.outcome")                 // an Outcome* value, on seqby.events
	AttrAttempt  = attribute.Key("seqby.attempt")                 // the attempt's number, from 1
	AttrStream   = attribute.Key("seqby.stream")                  // the stream the entry was read from
	AttrEntry    = attribute.Key("seqby.entry_id")                // the entry's stream id
	AttrSystem   = attribute.Key("messaging.system")              // always "seqby"
	AttrDest     = attribute.Key("messaging.destination.name")    // the category
	AttrGroup    = attribute.Key("messaging.consumer.group.name") // the handler's name
	AttrOpName   = attribute.Key("messaging.operation.name")      // "process"
	AttrOpType   = attribute.Key("messaging.operation.type")      // "process"
	AttrMsgID    = attribute.Key("messaging.message.id")          // the message id the publisher gave
	AttrErrType  = attribute.Key("error.type")                    // a failed attempt's kind (errorType)
)

// systemName is messaging.system on the engine's metrics and spans.
const systemName = "seqby"

// Outcomes counted by seqby.events.
const (
	OutcomeHandled = "handled" // the handler succeeded: acked
	OutcomeRetried = "retried" // an attempt failed and is retried after a backoff
	OutcomeFailed  = "failed"  // the entry cannot be processed: its partition halts (or stays halted)
	// OutcomeSkipped: acked without a handler call, as not the handler's
	// (a pm or handler reads every entry of its categories, and acks
	// those of types it has no method for), published before it first
	// started, or deleted while pending. Counted as handled before issue
	// #26: a pm handling 25 events of a busy category showed thousands.
	OutcomeSkipped = "skipped"
)

// Config is what a Telemetry needs from the engine; New takes it.
type Config struct {
	// MeterProvider receives the metrics (Options.MeterProvider); nil
	// records nothing.
	MeterProvider metric.MeterProvider
	// TracerProvider starts the attempts' spans (Options.TracerProvider);
	// nil starts none.
	TracerProvider trace.TracerProvider
	// Propagator reads the publisher's trace context from an entry's
	// fields (Options.Propagator), to link an attempt's span to it. Nil:
	// W3C trace context.
	Propagator propagation.TextMapPropagator
	// Client reads what the gauges ask Redis: backlogs and halt counts.
	Client redis.UniversalClient
	// Log gets the gauges' failed reads, at debug level: the next
	// collection reads again. Nil: discarded.
	Log *slog.Logger
	// Snapshot returns the engine's state the gauges report, at each
	// collection; nil reports none. It must not block on Redis.
	Snapshot func() Snapshot
}

// Telemetry holds the engine's instruments and tracer. Its methods are
// safe for concurrent use.
type Telemetry struct {
	cfg    Config
	tracer trace.Tracer // nil: no spans

	events       metric.Int64Counter
	process      metric.Float64Histogram
	acquired     metric.Int64Counter
	lost         metric.Int64Counter
	resolved     metric.Int64Counter
	fenced       metric.Int64Counter
	reclaimed    metric.Int64Counter
	replicaShort metric.Int64Counter
	renew        metric.Float64Histogram
	discovery    metric.Float64Histogram
	meter        metric.Meter
	gauges       gauges

	// attrs caches the attribute sets of the per-event measurements, by
	// attrsKey: building one allocates, and it runs for every event. The
	// keys are bounded by handlers × categories × outcomes (error types).
	attrs sync.Map
}

// attrsKey names a cached attribute set: kind "events" (with outcome) or
// "process" (with the error type, "" on success).
type attrsKey struct{ kind, handler, category, extra string }

// cached returns the attribute set of k, built once by build.
func (t *Telemetry) cached(k attrsKey, build func() []attribute.KeyValue) metric.MeasurementOption {
	if o, ok := t.attrs.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := t.attrs.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(build()...)))
	return o.(metric.MeasurementOption)
}

// secondsBuckets are the OpenTelemetry semantic conventions' boundaries
// for messaging durations.
var secondsBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// New creates the instruments on cfg.MeterProvider, and the tracer when
// cfg.TracerProvider is set. It fails when the provider refuses an
// instrument.
func New(cfg Config) (*Telemetry, error) {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(scopeName)
	if cfg.Propagator == nil {
		cfg.Propagator = propagation.TraceContext{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	t := &Telemetry{cfg: cfg}
	if cfg.TracerProvider != nil {
		t.tracer = cfg.TracerProvider.Tracer(scopeName)
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(secondsBuckets...))
		errs = append(errs, err)
		return h
	}
	gauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	t.events = counter("seqby.events", "{event}", "Ends of handler attempts by outcome: handled (the handler succeeded; acked), retried (failed, tried again after a backoff), failed (the partition halts on the entry), skipped (acked without a handler call: a message type the handler has no method for, or an entry published before it first started or deleted while pending).")
	t.process = seconds("messaging.process.duration", "Duration of one handler attempt.")
	t.acquired = counter("seqby.lease.acquired", "{lease}", "Partition leases this instance acquired.")
	t.lost = counter("seqby.lease.lost", "{lease}", "Partition leases this instance lost while it owned them (expired, taken over, or fenced); an operator's resolve of a halt counts in seqby.partitions.resolved instead.")
	t.resolved = counter("seqby.partitions.resolved", "{partition}", "Halted partitions of this instance whose head an operator resolved (seqbyctl skip or dlq move), which ends this instance's lease.")
	t.fenced = counter("seqby.lease.fenced", "{call}", "Fenced Redis calls refused because this instance's lease token was stale.")
	t.reclaimed = counter("seqby.entries.reclaimed", "{entry}", "Pending entries of a past owner taken over by this instance at claim.")
	t.replicaShort = counter("seqby.replicas.short", "{barrier}", "Replica barriers of the strict mode (Options.ReplicaAcks) that failed or came back with fewer acknowledgements than asked; no attempt starts and no entry is acked meanwhile.")
	t.renew = seconds("seqby.lease.renew.duration", "Duration of one renewal of all this instance's leases.")
	t.discovery = seconds("seqby.discovery.duration", "Duration of one discovery cycle of a handler.")
	t.gauges = gauges{
		owned:    gauge("seqby.partitions.owned", "{partition}", "Partitions this instance owns, per handler."),
		halted:   gauge("seqby.partitions.halted", "{partition}", "Halted partitions across every instance, per handler (from the halt index in Redis)."),
		paused:   gauge("seqby.partitions.paused", "{partition}", "Partitions this instance owns that an operator paused (seqbyctl pause), per handler: every one it owns while the handler is paused."),
		lag:      gauge("seqby.partition.lag", "s", "Age of the oldest entry not handled yet, per owned partition with work."),
		backlog:  gauge("seqby.partition.backlog", "{entry}", "Entries not handled yet, per owned partition with work."),
		hlag:     gauge("seqby.handler.lag", "s", "The largest seqby.partition.lag of a handler on this instance (0 when it has no work)."),
		hbacklog: gauge("seqby.handler.backlog", "{entry}", "The sum of seqby.partition.backlog of a handler on this instance."),
		index:    gauge("seqby.index.partitions", "{partition}", "Partitions in a category's index, as this instance last read it."),
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	t.meter = m
	return t, nil
}

// Event counts one end of a handler attempt, or of an entry settled
// without one, in seqby.events; outcome is one of the Outcome* values.
func (t *Telemetry) Event(ctx context.Context, handler, category, outcome string) {
	t.events.Add(ctx, 1, t.cached(attrsKey{"events", handler, category, outcome}, func() []attribute.KeyValue {
		return []attribute.KeyValue{AttrHandler.String(handler), AttrCategory.String(category), AttrOutcome.String(outcome)}
	}))
}

// LeaseAcquired counts a partition lease handler's owner acquired.
func (t *Telemetry) LeaseAcquired(handler string) {
	t.acquired.Add(context.Background(), 1, handlerAttrs(handler))
}

// LeaseLost counts a lease handler's owner lost while it owned it.
func (t *Telemetry) LeaseLost(handler string) {
	t.lost.Add(context.Background(), 1, handlerAttrs(handler))
}

// LeaseFenced counts a Redis call of handler's owner refused as fenced.
func (t *Telemetry) LeaseFenced(handler string) {
	t.fenced.Add(context.Background(), 1, handlerAttrs(handler))
}

// PartitionResolved counts a halted partition of handler whose head an
// operator resolved.
func (t *Telemetry) PartitionResolved(handler string) {
	t.resolved.Add(context.Background(), 1, handlerAttrs(handler))
}

// EntriesReclaimed counts n pending entries of a past owner that
// handler's new owner took over at claim.
func (t *Telemetry) EntriesReclaimed(handler string, n int64) {
	t.reclaimed.Add(context.Background(), n, handlerAttrs(handler))
}

// ReplicaShort counts a strict-mode barrier that failed or came back
// short (the replicas.Config.OnShort hook).
func (t *Telemetry) ReplicaShort() {
	t.replicaShort.Add(context.Background(), 1)
}

// RenewDuration records how long one renewal of every lease took.
func (t *Telemetry) RenewDuration(ctx context.Context, d time.Duration) {
	t.renew.Record(ctx, d.Seconds())
}

// DiscoveryDuration records how long one discovery cycle of handler took.
func (t *Telemetry) DiscoveryDuration(ctx context.Context, handler string, d time.Duration) {
	t.discovery.Record(ctx, d.Seconds(), handlerAttrs(handler))
}

// handlerAttrs is the attribute set of a per-handler counter.
func handlerAttrs(handler string) metric.MeasurementOption {
	return metric.WithAttributes(AttrHandler.String(handler))
}

// StartAttempt starts attempt n (from 1) of handler on en, of category:
// its consumer span "process <category>" when tracing, and its duration
// measurement. ctx carries the span, so the handler's own spans are its
// children. end records both with the attempt's error (nil: success).
func (t *Telemetry) StartAttempt(ctx context.Context, handler, category, key string, en rdb.Entry, n int) (_ context.Context, end func(error)) {
	start := time.Now()
	var span trace.Span
	if t.tracer != nil {
		attrs := []attribute.KeyValue{
			AttrSystem.String(systemName), AttrOpName.String("process"), AttrOpType.String("process"),
			AttrDest.String(category), AttrGroup.String(handler),
			AttrHandler.String(handler), AttrCategory.String(category), AttrKey.String(key),
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
			errType = errorType(err)
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

// Lag is what the gauges see of one partition's work after its last
// read. The partition's goroutine sets it; a collection reads it, so each
// part is an atomic.
type Lag struct {
	oldest atomic.Int64 // Unix ms of the oldest entry read and not handled; 0: none
	local  atomic.Int64 // entries read and not handled
	more   atomic.Bool  // the last read was full: more wait in Redis
}

// Set records that the entry of stream id id is the oldest not handled,
// with local entries read and not handled (it included), and more when
// the last read was full.
func (l *Lag) Set(id string, local int64, more bool) {
	l.oldest.Store(entryMillis(id))
	l.local.Store(local)
	l.more.Store(more)
}

// Clear records that the partition has no work.
func (l *Lag) Clear() {
	l.oldest.Store(0)
	l.local.Store(0)
	l.more.Store(false)
}

// Load returns the oldest entry's Unix milliseconds (0: no work), the
// entries read and not handled, and whether more wait in Redis.
func (l *Lag) Load() (oldest, local int64, more bool) {
	return l.oldest.Load(), l.local.Load(), l.more.Load()
}

// entryMillis is the Unix milliseconds of a stream entry id ("ms-seq"),
// at least 1 (0 means no entry).
func entryMillis(id string) int64 {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// errorType is error.type of a failed attempt: the kind of failure the
// engine tells apart, else "error" (an error's text would make a series
// per message).
func errorType(err error) string {
	switch {
	case errors.Is(err, contract.ErrHandlerTimeout):
		return "timeout"
	case errors.Is(err, contract.ErrPermanent):
		return "permanent"
	case errors.Is(err, contract.ErrHandlerPanic):
		return "panic"
	}
	return "error"
}
