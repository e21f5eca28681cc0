package runtime

import (
	"github.com/seqby/seqby/runtime/internal/executor"
)

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
