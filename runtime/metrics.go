package runtime

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Metrics: the engine records on the OpenTelemetry metrics API through
// Options.MeterProvider (no-op by default). The instruments, their units
// and attributes are listed in docs/operating.md ("Metrics, tracing and health"); names follow
// the OpenTelemetry semantic conventions for messaging where one fits
// (messaging.process.duration), and are seqby.* otherwise.

// meterName is the instrumentation scope of the engine's instruments.
const meterName = "github.com/seqby/seqby/runtime"

// Attribute keys of the engine's metrics and spans.
const (
	attrHandler  = attribute.Key("seqby.handler")
	attrCategory = attribute.Key("seqby.category")
	attrKey      = attribute.Key("seqby.key")
	attrOutcome  = attribute.Key("seqby.outcome")
	attrAttempt  = attribute.Key("seqby.attempt")
	attrStream   = attribute.Key("seqby.stream")
	attrEntry    = attribute.Key("seqby.entry_id")
	attrSystem   = attribute.Key("messaging.system")
	attrDest     = attribute.Key("messaging.destination.name")
	attrGroup    = attribute.Key("messaging.consumer.group.name")
	attrOpName   = attribute.Key("messaging.operation.name")
	attrOpType   = attribute.Key("messaging.operation.type")
	attrMsgID    = attribute.Key("messaging.message.id")
	attrErrType  = attribute.Key("error.type")
)

// systemName is messaging.system on the engine's metrics and spans.
const systemName = "seqby"

// Outcomes counted by seqby.events.
const (
	outcomeHandled = "handled" // the handler succeeded: acked
	outcomeRetried = "retried" // an attempt failed and is retried after a backoff
	outcomeFailed  = "failed"  // the entry cannot be processed: its partition halts (or stays halted)
	// outcomeSkipped: acked without a handler call, as not the handler's
	// (a pm or handler reads every entry of its categories, and acks
	// those of types it has no method for), published before it first
	// started, or deleted while pending. Counted as handled before issue
	// #26: a pm handling 25 events of a busy category showed thousands.
	outcomeSkipped = "skipped"
)

// meters holds the engine's instruments.
type meters struct {
	events    metric.Int64Counter
	process   metric.Float64Histogram
	acquired  metric.Int64Counter
	lost      metric.Int64Counter
	resolved  metric.Int64Counter
	fenced    metric.Int64Counter
	reclaimed metric.Int64Counter
	// replicaShort counts the strict mode's short barriers.
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
func (ms *meters) cached(k attrsKey, build func() []attribute.KeyValue) metric.MeasurementOption {
	if o, ok := ms.attrs.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := ms.attrs.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(build()...)))
	return o.(metric.MeasurementOption)
}

// secondsBuckets are the OpenTelemetry semantic conventions' boundaries
// for messaging durations.
var secondsBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// newMeters creates the instruments on mp (no-op when nil).
func newMeters(mp metric.MeterProvider) (*meters, error) {
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(meterName)
	var (
		ms   meters
		errs []error
	)
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
	ms.events = counter("seqby.events", "{event}", "Ends of handler attempts by outcome: handled (the handler succeeded; acked), retried (failed, tried again after a backoff), failed (the partition halts on the entry), skipped (acked without a handler call: a message type the handler has no method for, or an entry published before it first started or deleted while pending).")
	ms.process = seconds("messaging.process.duration", "Duration of one handler attempt.")
	ms.acquired = counter("seqby.lease.acquired", "{lease}", "Partition leases this instance acquired.")
	ms.lost = counter("seqby.lease.lost", "{lease}", "Partition leases this instance lost while it owned them (expired, taken over, or fenced); an operator's resolve of a halt counts in seqby.partitions.resolved instead.")
	ms.resolved = counter("seqby.partitions.resolved", "{partition}", "Halted partitions of this instance whose head an operator resolved (seqbyctl skip or dlq move), which ends this instance's lease.")
	ms.fenced = counter("seqby.lease.fenced", "{call}", "Fenced Redis calls refused because this instance's lease token was stale.")
	ms.reclaimed = counter("seqby.entries.reclaimed", "{entry}", "Pending entries of a past owner taken over by this instance at claim.")
	ms.replicaShort = counter("seqby.replicas.short", "{barrier}", "Replica barriers of the strict mode (Options.ReplicaAcks) that failed or came back with fewer acknowledgements than asked; no attempt starts and no entry is acked meanwhile.")
	ms.renew = seconds("seqby.lease.renew.duration", "Duration of one renewal of all this instance's leases.")
	ms.discovery = seconds("seqby.discovery.duration", "Duration of one discovery cycle of a handler.")
	ms.gauges = gauges{
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
	ms.meter = m
	return &ms, nil
}

// register starts observing e's gauges at each collection, until the
// returned registration is unregistered (when Run returns).
func (ms *meters) register(e *Engine) (metric.Registration, error) {
	g := ms.gauges
	return ms.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		e.observe(ctx, o, g)
		return nil
	}, g.owned, g.halted, g.paused, g.lag, g.backlog, g.hlag, g.hbacklog, g.index)
}

// gauges are the observable instruments, observed together.
type gauges struct {
	owned, halted, paused, lag, backlog, hlag, hbacklog, index metric.Float64ObservableGauge
}

// observeTimeout bounds the Redis reads of one collection.
const observeTimeout = 2 * time.Second

// observe reports the gauges. Owned counts, lag ages and index sizes are
// this instance's own; the backlog of a partition whose last read was
// full, and the halted counts, are read from Redis (a pipelined XINFO
// GROUPS per such lane, an SCARD per handler), so a collection costs
// nothing per idle partition.
func (e *Engine) observe(ctx context.Context, o metric.Observer, g gauges) {
	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	now := time.Now()
	type work struct {
		p       *partition
		age     time.Duration
		backlog int64
	}
	e.mu.Lock()
	var busy []work
	owned, paused := map[string]int{}, map[string]int{}
	for _, p := range e.parts {
		if !p.holding() {
			continue
		}
		owned[p.reg.Name]++
		if p.paused.Load() || e.handlerPaused(p.reg.Name) != nil {
			paused[p.reg.Name]++
		}
		if oldest := p.lagOldest.Load(); oldest != 0 {
			busy = append(busy, work{p, max(now.Sub(time.UnixMilli(oldest)), 0), p.lagLocal.Load()})
		}
	}
	handlers := slices.Clone(e.handlers)
	e.mu.Unlock()

	// A full last read leaves entries in Redis beyond those read: ask
	// Redis for those partitions' backlog, per handler (its group).
	more := map[string][]int{}
	for i, w := range busy {
		if w.p.lagMore.Load() {
			more[w.p.reg.Name] = append(more[w.p.reg.Name], i)
		}
	}
	for group, idx := range more {
		var streams []string
		for _, i := range idx {
			streams = append(streams, busy[i].p.lanes...)
		}
		n, ok, err := rdb.Backlog(ctx, e.c, group, streams)
		if err != nil {
			e.log.Debug("seqby: reading the backlog for metrics failed", "handler", group, "err", err)
			continue
		}
		at := 0
		for _, i := range idx {
			sum, known := int64(0), true
			for range busy[i].p.lanes {
				sum, known = sum+n[at], known && ok[at]
				at++
			}
			if known {
				busy[i].backlog = max(sum, busy[i].backlog)
			}
		}
	}

	hlag, hbacklog := map[string]float64{}, map[string]int64{}
	for _, w := range busy {
		h := w.p.reg.Name
		cat := w.p.category
		if cat == "" {
			cat = strings.Join(w.p.cats, ",") // a pm: its categories, as in LeaseInfo
		}
		attrs := metric.WithAttributes(attrHandler.String(h), attrCategory.String(cat), attrKey.String(w.p.key))
		o.ObserveFloat64(g.lag, w.age.Seconds(), attrs)
		o.ObserveFloat64(g.backlog, float64(w.backlog), attrs)
		hlag[h] = max(hlag[h], w.age.Seconds())
		hbacklog[h] += w.backlog
	}
	for _, h := range handlers {
		attrs := metric.WithAttributes(attrHandler.String(h))
		o.ObserveFloat64(g.owned, float64(owned[h]), attrs)
		o.ObserveFloat64(g.paused, float64(paused[h]), attrs)
		o.ObserveFloat64(g.hlag, hlag[h], attrs)
		o.ObserveFloat64(g.hbacklog, float64(hbacklog[h]), attrs)
	}
	if counts, err := rdb.HaltCounts(ctx, e.c, handlers); err != nil {
		e.log.Debug("seqby: counting halted partitions for metrics failed", "err", err)
	} else {
		for i, h := range handlers {
			o.ObserveFloat64(g.halted, float64(counts[i]), metric.WithAttributes(attrHandler.String(h)))
		}
	}
	for cat, n := range e.index.sizes() {
		o.ObserveFloat64(g.index, float64(n), metric.WithAttributes(attrCategory.String(cat)))
	}
}

// observeWork records what the metrics see of p's work after a read: en,
// when ok, is the oldest entry p has not handled, and the entries read
// ahead wait behind it.
func (p *partition) observeWork(en rdb.Entry, ok, more bool) {
	if !ok {
		p.lagOldest.Store(0)
		p.lagLocal.Store(0)
		p.lagMore.Store(false)
		return
	}
	p.lagOldest.Store(entryMillis(en.ID))
	p.lagLocal.Store(int64(len(p.ahead)) + 1)
	p.lagMore.Store(more)
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

// countOutcome counts one end of a handler attempt (or of an entry that
// halts without one).
func (e *Engine) countOutcome(ctx context.Context, reg Registration, category, outcome string) {
	e.metrics.events.Add(ctx, 1, e.metrics.cached(attrsKey{"events", reg.Name, category, outcome}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attrHandler.String(reg.Name), attrCategory.String(category), attrOutcome.String(outcome)}
	}))
}

// countSettled counts the outcome of an entry an owner settled.
func (e *Engine) countSettled(reg Registration, category string, out outcome) {
	switch out {
	case outDone:
		e.countOutcome(context.Background(), reg, category, outcomeHandled)
	case outSkip:
		e.countOutcome(context.Background(), reg, category, outcomeSkipped)
	case outHalt:
		e.countOutcome(context.Background(), reg, category, outcomeFailed)
	}
}

// handlerAttrs is the attribute set of a per-handler counter.
func handlerAttrs(handler string) metric.MeasurementOption {
	return metric.WithAttributes(attrHandler.String(handler))
}
