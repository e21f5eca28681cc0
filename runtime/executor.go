package runtime

import (
	"github.com/seqby/seqby/runtime/internal/executor"
)

// newExecutor builds the engine's executor from o (already defaulted).
// Its handlers come in through Register and its groups' starts at Run;
// what it asks of the engine (known types, which other builds route a
// type) are e's own answers.
func (e *Engine) newExecutor(o Options) *executor.Executor {
	cfg := executor.Config{Log: e.log, Telemetry: e.telemetry, Owner: o.OwnerID, Timeout: o.HandlerTimeout,
		Retry:         executor.RetryPolicy(o.Retry),
		MaxDeliveries: o.MaxDeliveries, Concurrency: o.Concurrency,
		KnownType: e.reg.KnownType, OtherBuilds: e.members.BuildsRouting, States: o.StateStore}
	if al, ok := o.StateStore.(appliedLoader); ok {
		cfg.LoadApplied = al.loadApplied
	}
	return executor.New(cfg)
}

// handlerOf is reg as the executor runs it, decoding with codec.
func handlerOf(reg Registration, codec Codec) executor.Handler {
	h := executor.Handler{Name: reg.Name, Kind: reg.Kind.String(), PM: reg.Kind == ProcessManager, NewState: reg.NewState,
		Retry: (*executor.RetryPolicy)(reg.Retry), Timeout: reg.Timeout}
	for _, rt := range reg.Routes {
		h.Routes = append(h.Routes, routeOf(rt, codec))
	}
	return h
}

// routeOf is rt as the executor calls it, decoding with codec.
func routeOf(rt Route, codec Codec) executor.Route {
	return executor.Route{Category: rt.Category, Type: rt.Type, Correlate: rt.Correlate, Invoke: rt.Invoke,
		Decode: func(payload []byte) (any, error) { return rt.Decode(codec, payload) }}
}
