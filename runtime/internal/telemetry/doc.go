// Package telemetry is the engine's OpenTelemetry side: its metrics, and
// the consumer span of each handler attempt. The instruments, their units
// and attributes are listed in docs/operating.md ("Metrics, tracing and
// health"); names follow the OpenTelemetry semantic conventions for
// messaging where one fits (messaging.process.duration), and are seqby.*
// otherwise.
//
// The engine keeps one Telemetry, built from Options' providers (no-ops
// when nil), and tells it of what happens: an attempt's start and end, a
// settled entry, a lease acquired or lost. The gauges need the engine's
// state at each collection; the engine passes that in as a callback
// (Config.Snapshot), since this package sits under the engine (package
// runtime) and must not import it.
package telemetry
