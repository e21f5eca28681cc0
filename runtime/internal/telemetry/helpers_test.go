package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// reader collects a Telemetry's metrics through an OTel manual reader, as
// an exporter would.
type reader struct {
	t *testing.T
	r *sdkmetric.ManualReader
}

func newReader(t *testing.T) (*reader, *sdkmetric.MeterProvider) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return &reader{t, r}, mp
}

// value sums the data points of metric name whose attributes include
// every one of want (a histogram's: their counts); found is false when no
// point matched.
func (m *reader) value(name string, want ...attribute.KeyValue) (v float64, found bool) {
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
		if sm.Scope.Name != scopeName {
			m.t.Fatalf("scope %q, want %q", sm.Scope.Name, scopeName)
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
