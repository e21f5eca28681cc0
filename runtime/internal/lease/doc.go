// Package lease holds the engine's keyed leases as values, as etcd's
// concurrency.Session holds one: a Held is one lease a worker runs under,
// with its context (cancelled when the lease is lost), its local deadline
// and the loss that ends it; a Gate admits each attempt of an entry under
// it by the fence rule; a Renewer renews every Held in one call per
// heartbeat. Leases keeps what they share: the engine's values, the
// admitted confirmation ages, the rate limits of their warnings.
//
// An operator's handler pauses (Pauses) are here too, since every gate
// checks them before it admits an attempt, and so is Adopt, which takes
// back a lease of this incarnation that no worker runs.
//
// It sits under the engine (package runtime) and its workers (package
// worker) and must not import either. What a Held asks of its worker
// (whether it is halted, the strict mode's wait for replicas, a refused
// renewal) comes in as Hooks; what the engine decides (a handler's pause,
// the concurrency slots) comes in Config.
package lease
