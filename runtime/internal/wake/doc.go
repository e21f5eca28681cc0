// Package wake wakes idle partitions when an entry is published to them,
// without polling: the Waiter follows the signal streams publishers append
// to, and the Keeper keeps this instance's own signal stream and the
// fanout markers that decide which streams publishers signal.
//
// It sits under the engine (package runtime) and must not import it: what
// the engine wants to hear of (a signal, a possible gap) it passes in as
// callbacks.
package wake
