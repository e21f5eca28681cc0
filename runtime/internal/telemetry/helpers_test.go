package telemetry

import (
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/seqby/seqby/runtime/internal/telemetry/telemetrytest"
)

// newReader collects a Telemetry's metrics as an exporter would,
// refusing any scope but the engine's.
func newReader(t *testing.T) (*telemetrytest.Reader, *sdkmetric.MeterProvider) {
	r, mp := telemetrytest.New(t)
	r.Scope = scopeName
	return r, mp
}
