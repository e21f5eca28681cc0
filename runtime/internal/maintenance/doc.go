// Package maintenance keeps an engine's partitions tidy, away from the
// path of any event:
//
//   - reaping: cold partitions (their lanes empty, nothing pending,
//     nothing published for ReapAfter) that nobody owns are removed,
//     streams, groups, generations and index entry (rdb.Reap), so a
//     category's index does not grow without bound. One engine instance,
//     the maintenance leader, reaps every category the engines announce
//     (Run);
//   - retention: a worker trims its lanes to what some group of the
//     category has not acked (Trim), so a handled partition ends empty
//     and can turn cold;
//   - the unowned check: partitions with work and no owner for longer
//     than UnownedAfter are reported as faults (CheckUnowned).
//
// Reaping takes three parts, two of them elsewhere: an owner lets its
// partition go once Redis finds it cold (the worker's cold release), and
// acquires refuse a cold partition (rdb.ErrCold), so nobody owns it again
// until something is published to it; then the reaper removes it. Every
// step checks and acts in one script in the partition's slot, so a
// publish racing a step either keeps the partition or recreates it, and
// the reaper's own steps are safe to run twice or beside another reaper
// (rdb.Reap's doc shows why).
//
// It sits under the engine (package runtime) and must not import it.
// What it needs of the engine (the owned set, where faults go, adoption
// of a lease whose acquire ran twice, the index cache) comes in Config as
// values and callbacks. Its own lock guards the unowned check's marks, so
// they share no lock with the engine or the fault table.
package maintenance
