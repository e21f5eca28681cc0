// Package discovery balances an engine's keyed handlers and sequential
// pms across the live instances. Each DiscoveryInterval, per handler, a
// cycle announces the instance, lists the claimable units (a keyed
// handler's partition streams, or a pm's correlation values) from the
// categories' partition indexes, and moves the instance's share toward
// ceil(units / live members): it hands the excess over at a message
// boundary, or claims free units in pipelines of acquires and starts a
// worker for each.
//
// What a cycle must not repeat in vain it remembers: the index it read
// last (Index, read again only when signals or time say it may have
// changed), the units found held by another instance (skipped for a
// while), the partitions an acquire found cold (skipped until a signal
// for their key), the categories above PartitionWarnThreshold, and the
// rate limit of the failed-acquire warning.
//
// It sits under the engine (package runtime) and must not import it.
// What it needs of the engine (the key rules, the unowned check) comes in
// Config as values and callbacks, and Run calls back after each round of
// cycles for the unkeyed fans; the workers it starts join the worker.Set it is given. Its
// own lock guards its memos, and the Index has its own, so neither
// shares a lock with the engine.
package discovery
