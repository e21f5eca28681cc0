// Package telemetrytest reads an engine's metrics in tests, through an
// OpenTelemetry manual reader, as an exporter would. The runtime's tests
// and package telemetry's share it.
package telemetrytest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Reader collects the metrics of a MeterProvider it made.
type Reader struct {
	t testing.TB
	r *sdkmetric.ManualReader
	// Scope, when set, is the only instrumentation scope Value accepts: a
	// metric of another scope fails the test.
	Scope string
}

// New returns a Reader and the MeterProvider it reads, shut down at
// t.Cleanup.
func New(t testing.TB) (*Reader, *sdkmetric.MeterProvider) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return &Reader{t: t, r: r}, mp
}

// Value sums the data points of metric name whose attributes include every
// one of want (a histogram's: their counts); found is false when no point
// matched.
func (m *Reader) Value(name string, want ...attribute.KeyValue) (v float64, found bool) {
	m.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.r.Collect(context.Background(), &rm); err != nil {
		m.t.Fatal(err)
	}
	match := func(set attribute.Set) bool {
		for _, kv := range want {
			if got, ok := set.Value(kv.Key); !ok || got != kv.Value {
				return false
			}
		}
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		if m.Scope != "" && sm.Scope.Name != m.Scope {
			m.t.Fatalf("scope %q, want %q", sm.Scope.Name, m.Scope)
		}
		for _, mt := range sm.Metrics {
			if mt.Name != name {
				continue
			}
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						v, found = v+float64(p.Value), true
					}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						v, found = v+p.Value, true
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						v, found = v+float64(p.Count), true
					}
				}
			default:
				m.t.Fatalf("metric %s: unexpected data %T", name, mt.Data)
			}
		}
	}
	return v, found
}
