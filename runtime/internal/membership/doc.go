// Package membership is one engine instance's record among the others:
// its identity (the OwnerID's key, held for its incarnation), its
// announcements in the handlers' member sets and its leaving them at a
// graceful stop, the health strikes that decide whether it counts as live
// for a handler, the faults it reports (partitions benched for permanent
// Redis errors, partitions seen unowned), and its deploy records (its
// build of every handler, and the view of the other builds in a rolling
// deploy).
//
// Engine identity. OwnerID names an instance for operators (halt
// records, member sets, Status), but two processes can be given the same
// one: a fixed "w1" in a config, a hostname or pod name, a restarted
// incarnation while the old one is only stalled. So a lease's token never
// rests on OwnerID alone:
//
//   - every engine draws an incarnation at NewEngine, "<OwnerID>~<random
//     hex>" (NewIncarnation), the owner part of every lease token and
//     consumer name of a keyed partition it creates, so two processes
//     never hold one token, and a resumed stale incarnation's token fails
//     every fence;
//   - adoption takes back only leases of this incarnation;
//   - Run takes the OwnerID's key (rdb.OwnerKey) before anything else
//     (ClaimOwner) and the heartbeat renews it (RenewOwner): a second live
//     process with the same OwnerID is refused at start with
//     ErrOwnerInUse. A key left by a killed incarnation only shrinks
//     toward its end (LeaseTTL), so Run waits for it, and refuses as soon
//     as it sees the key renewed (a live holder).
//
// It sits under the engine (package runtime) and must not import it.
// What it needs from the engine comes in as Config callbacks: how many
// partitions the instance owns per handler (Owned), and where a fault
// goes (OnFault). Its faults are Fault, which runtime converts to
// runtime.Fault. Its own lock guards its tables, so none of them shares
// the engine's.
package membership
