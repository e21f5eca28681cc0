// Package worker runs the engine's owned partitions: a Worker per lease
// of a keyed handler's partition or of a sequential pm's correlation
// value, which reads the lanes under the lease, one entry at a time in
// order, runs each through the executor behind the lease's gate (the
// fence rule), and acks it with the next fenced call. How a worker reads
// is its reader: a keyed partition's (read ahead, and with
// Registration.AckBatch a batch of acks and a prefetch) or a pm's (the
// oldest entry across its categories' lanes). One loop serves both.
//
// A halted worker keeps its head pending and retries it from memory; its
// halt record lets operators see and resolve it. An idle worker keeps no
// goroutine: it sleeps on callbacks (a wake-up, its release, the end of
// its lease, the safety net) and resumes on a new goroutine. Set is the
// owned set, with its own lock: discovery adds to it, a worker removes
// itself as it ends, the heartbeat lists its leases.
//
// It sits under the engine (package runtime) and must not import it.
// What it needs of the engine (retention's trim, OnHalt, a handler's
// pause) comes in Config as values and callbacks (the executor counts
// each settled outcome, Executor.Settled);
// the halts it keeps are contract.Halt, which runtime converts.
package worker
