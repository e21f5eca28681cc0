package outbox

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// Metrics: the relay records on the OpenTelemetry metrics API through
// RelayOptions.MeterProvider (no-op by default):
//
//   - seqby.outbox.published (counter, {record}): records marked PUBLISHED
//   - seqby.outbox.abandoned (counter, {record}): records marked ABANDONED
//   - seqby.outbox.lag (gauge, s): age of the oldest PENDING record, 0 when
//     none is pending
//   - seqby.outbox.pending (gauge, {record}): PENDING records
//   - seqby.outbox.abandoned.records (gauge, {record}): ABANDONED records
//     kept for operators (the backlog to alert on; the counter only says
//     when new ones appear)
//
// Each carries seqby.outbox.table and seqby.outbox.relay. The gauges are
// read from the database when the exporter collects (one indexed query).

const meterName = "github.com/seqby/seqby/outbox"

var (
	attrTable = attribute.Key("seqby.outbox.table")
	attrRelay = attribute.Key("seqby.outbox.relay")
)

type meters struct {
	pub, aband metric.Int64Counter
	attrs      metric.MeasurementOption
	reg        metric.Registration
}

func newMeters(r *Relay) (*meters, error) {
	mp := r.opts.MeterProvider
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	meter := mp.Meter(meterName)
	m := &meters{attrs: metric.WithAttributes(attrTable.String(r.table), attrRelay.String(r.opts.Name))}
	var err error
	if m.pub, err = meter.Int64Counter("seqby.outbox.published", metric.WithUnit("{record}"),
		metric.WithDescription("Outbox records published to Redis and marked PUBLISHED.")); err != nil {
		return nil, err
	}
	if m.aband, err = meter.Int64Counter("seqby.outbox.abandoned", metric.WithUnit("{record}"),
		metric.WithDescription("Outbox records that can never be published (invalid key or record), marked ABANDONED.")); err != nil {
		return nil, err
	}
	lag, err := meter.Float64ObservableGauge("seqby.outbox.lag", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest PENDING outbox record; 0 when none is pending."))
	if err != nil {
		return nil, err
	}
	pend, err := meter.Int64ObservableGauge("seqby.outbox.pending", metric.WithUnit("{record}"),
		metric.WithDescription("PENDING outbox records."))
	if err != nil {
		return nil, err
	}
	abRecs, err := meter.Int64ObservableGauge("seqby.outbox.abandoned.records", metric.WithUnit("{record}"),
		metric.WithDescription("ABANDONED outbox records kept for operators (until Outbox.DeleteAbandoned)."))
	if err != nil {
		return nil, err
	}
	obs := metric.WithAttributes(attrTable.String(r.table), attrRelay.String(r.opts.Name))
	m.reg, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s, err := stats(ctx, r.db, r.d, r.table)
		if err != nil {
			return err
		}
		o.ObserveFloat64(lag, s.OldestPending.Seconds(), obs)
		o.ObserveInt64(pend, s.Pending, obs)
		o.ObserveInt64(abRecs, s.Abandoned, obs)
		return nil
	}, lag, pend, abRecs)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *meters) close() {
	if m != nil && m.reg != nil {
		m.reg.Unregister()
	}
}

func (m *meters) published(ctx context.Context, n int64) {
	if m != nil {
		m.pub.Add(context.WithoutCancel(ctx), n, m.attrs)
	}
}

func (m *meters) abandoned(ctx context.Context) {
	if m != nil {
		m.aband.Add(context.WithoutCancel(ctx), 1, m.attrs)
	}
}
