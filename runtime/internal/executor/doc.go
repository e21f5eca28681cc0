// Package executor runs a handler on one stream entry: it decodes the
// entry and finds its route, runs each attempt with its context (the
// lease and the MessageInfo a handler reads, a pm's correlation value),
// under the handler's timeout, with panics recovered, its span and its
// duration measured, and retries failures per the handler's retry policy
// until the entry is done or must halt. The engine runs every entry
// through it, keyed or not; the InlineBroker runs its attempts through it
// too (no timeout, no telemetry), so a unit test runs a handler the way
// the engine does. Its context keys are the only way to set or read what
// a handler's context carries (WithLease, LeaseFrom, WithMessage, ...):
// package runtime's LeaseFromContext and MessageFromContext read them
// (LeaseInfo has runtime's fields in runtime's order, so runtime converts
// it; MessageInfo it copies field by field, for its Replay pointer). It
// also counts each entry's settled outcome (Settled) for the engine's
// metrics.
//
// Nothing a message contains may crash an instance: a panic in a
// handler, its generated Decode or Correlate is a failure, a bad payload
// or unknown type a halt.
//
// Stuck and process-killing handlers. An attempt runs under the handler's
// timeout (Config.Timeout, or Handler.Timeout): past it, its context is
// cancelled and the attempt fails with ErrHandlerTimeout. A body that
// ignores its context cannot be stopped, so it is logged as stuck, again
// every timeout while it runs. A head read more than MaxDeliveries times
// (once per owner that read it: the message may be killing the processes
// that handle it) halts, permanently, without being run again
// (OverDelivered).
//
// It sits under the engine (package runtime) and must not import it. A
// registration comes in as a Handler, converted once when it is
// registered; what the engine decides (whether a type is known, which
// other builds route a type, whether an attempt may start under its
// lease) it passes in as callbacks in Config and as a Gate, and where
// each group starts once Run has registered them (SetStarts). The halts it returns are contract.Halt, which runtime converts.
package executor
