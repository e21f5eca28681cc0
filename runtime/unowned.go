package runtime

import (
	"context"
	"strings"
	"time"

	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A partition with work and no owner is normal for a moment (its owner
// crashed and the lease has not expired yet, or no discovery cycle has
// claimed it yet); for longer it means every instance running the handler
// fails to claim it, or none runs. Each instance checks its handlers'
// units it does not own, once per LeaseTTL, in one pipeline (rdb
// OwnerStates), and reports those unowned for longer than UnownedAfter
// (FaultUnowned: log, OnFault, Status.Faults). A unit without work (a cold
// partition left for the reaper, one its handler has drained) needs no
// owner and is never reported, and none is reported while the number of
// partitions owned across the instances grows from one check to the next
// (they are still claiming). The per-unit look is skipped while the
// other live instances' recorded counts cover every unit this one does
// not own and nothing is marked yet: in a steady state the check costs
// two calls per LeaseTTL, not one per partition.

// ownedByOthers sums how many of handler's partitions the live instances
// other than this one recorded owning (rdb.OwnedByOthers). When that
// covers every partition this one does not own, none is unowned but for a
// moment, and the check need not look at each one, which would cost a
// script per partition. complete is false on any doubt (an instance
// without a record, an error).
func (e *Engine) ownedByOthers(ctx context.Context, handler string) (sum int64, complete bool) {
	live, err := rdb.LiveMembers(ctx, e.c, handler, e.members.MemberTTL())
	if err != nil {
		return 0, false
	}
	sum, complete, err = rdb.OwnedByOthers(ctx, e.c, handler, e.o.OwnerID, live)
	return sum, err == nil && complete
}

// UnownedAfter is how long a partition with work may stay without an owner
// before it is reported: two lease TTLs (a crashed owner's lease expires)
// plus two discovery intervals (someone claims it). It is noticed within
// one more LeaseTTL, the period of the check.
func (e *Engine) UnownedAfter() time.Duration { return 2*e.o.LeaseTTL + 2*e.o.DiscoveryInterval }

// unownedMark is a unit seen without an owner, since when.
type unownedMark struct {
	handler string
	since   time.Time
	// waiting: last seen aged while the strict mode waited for the
	// partition's replicas; its time without an owner counts afresh.
	waiting bool
}

// checkUnowned runs the check for handler's units, at most once per
// LeaseTTL, after the cycle's claims and on its own deadline. The marks are bounded by the units in the indexes: a unit
// owned again, without work, or gone from the index is forgotten.
func (e *Engine) checkUnowned(base context.Context, handler string, units []unit) {
	now := time.Now()
	e.mu.Lock()
	if now.Sub(e.unownedAt[handler]) < e.o.LeaseTTL {
		e.mu.Unlock()
		return
	}
	e.unownedAt[handler] = now
	var checks []rdb.OwnerCheck
	var others []unit
	mine := int64(0)
	for _, u := range units {
		if w, ok := e.workers.Get(u.id); !ok {
			others = append(others, u)
			checks = append(checks, rdb.OwnerCheck{Lease: u.ref, Lanes: u.lanes})
		} else if w.Holding() {
			mine++
		}
	}
	marked := false
	for _, m := range e.unowned {
		marked = marked || m.handler == handler
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(base, e.o.LeaseTTL)
	defer cancel()
	sum, complete := e.ownedByOthers(ctx, handler)
	// Covered: the counts say every partition is owned, so the ones
	// marked earlier (seen free while the instances were still claiming)
	// are owned now; their marks go without a look at each partition.
	covered := complete && sum >= int64(len(others))
	if covered && !marked {
		if e.replicas != nil {
			e.replicas.NoteUnowned(handler, 0)
		}
		return
	}
	// More partitions owned than at the last check: the instances are
	// still claiming (a start with many partitions takes a while), so the
	// free ones wait their turn rather than being stuck. The marks are
	// kept; the report waits for a check that sees no progress.
	e.mu.Lock()
	growing := complete && mine+sum > e.ownedTotal[handler]
	if complete {
		e.ownedTotal[handler] = mine + sum
	}
	e.mu.Unlock()
	var states []rdb.Ownership
	if !covered {
		var unreadable, err error
		states, unreadable, err = rdb.OwnerStates(ctx, e.c, handler, checks)
		if err != nil {
			e.log.Warn("seqby: checking for unowned partitions failed; retried next lease TTL", "handler", handler, "err", err)
			return
		}
		if unreadable != nil {
			e.log.Warn("seqby: checking a partition's owner failed; it counts as unowned with work", "handler", handler, "err", unreadable)
		}
	}
	short := e.unownedShort(ctx, handler, others, states, covered)
	free := map[string]bool{}
	var report []Fault
	waiting := 0 // unowned for a while, and waiting for replicas
	e.mu.Lock()
	for i, u := range others {
		if covered || states[i] != rdb.FreeWithWork && states[i] != rdb.Unreadable {
			continue
		}
		free[u.id] = true
		m, seen := e.unowned[u.id]
		if !seen {
			e.unowned[u.id] = unownedMark{handler: handler, since: now}
			continue
		}
		if reported := e.members.HasFault(membership.FaultUnowned, u.id); reported || growing || now.Sub(m.since) < e.UnownedAfter() {
			continue
		}
		if short[u.id] {
			// Unowned while the strict mode waits for its replicas:
			// that is what it waits for (said once, below), and its time
			// without an owner counts from the end of the wait.
			e.unowned[u.id] = unownedMark{handler: handler, since: now, waiting: true}
			continue
		}
		f := Fault{Kind: FaultUnowned, Handler: handler, Category: strings.Join(u.cats, ","), Key: u.key,
			Stream: u.lanes[0], Since: m.since}
		e.members.AddFault(u.id, memberFault(f))
		report = append(report, f)
	}
	for id, m := range e.unowned {
		if m.handler == handler && m.waiting && free[id] {
			waiting++
		}
	}
	var recovered []Fault
	for id, m := range e.unowned {
		if m.handler != handler || free[id] {
			continue
		}
		delete(e.unowned, id)
		if f, ok := e.members.RemoveFault(membership.FaultUnowned, id); ok {
			recovered = append(recovered, faultOf(f))
		}
	}
	e.mu.Unlock()
	if e.replicas != nil {
		e.replicas.NoteUnowned(handler, waiting)
	}
	for _, f := range report {
		e.log.Error("seqby: partition has work and no owner; no instance running the handler manages to claim it. Check the other instances' logs (acquire failures, permanent redis errors) and that enough instances run the handler",
			"handler", f.Handler, "stream", f.Stream, "key", f.Key, "unowned_since", f.Since)
		e.alertFault(f)
	}
	for _, f := range recovered {
		e.log.Info("seqby: partition reported unowned has an owner again (or nothing left to do)", "handler", f.Handler, "stream", f.Stream, "key", f.Key)
	}
}

// unownedShort, in the strict mode, returns the partitions about to be
// reported unowned (free with work, marked for UnownedAfter) whose
// primary's last barrier, or one sent now where none ran lately, failed
// or came back short: they have no owner because the strict mode waits for
// their replicas (their owners lose each lease they take, or are
// refused), which is not a fault of the instances; checkUnowned says so
// once instead of an error per key. Nil in the default mode.
func (e *Engine) unownedShort(ctx context.Context, handler string, others []unit, states []rdb.Ownership, covered bool) map[string]bool {
	if e.replicas == nil || covered {
		return nil
	}
	now := time.Now()
	bySlot := map[int][]string{}
	e.mu.Lock()
	for i, u := range others {
		m, seen := e.unowned[u.id]
		if (states[i] == rdb.FreeWithWork || states[i] == rdb.Unreadable) && seen && m.handler == handler && now.Sub(m.since) >= e.UnownedAfter() {
			s := e.replicas.SlotOf(u.ref.Key)
			bySlot[s] = append(bySlot[s], u.id)
		}
	}
	e.mu.Unlock()
	if len(bySlot) == 0 {
		return nil
	}
	// The barriers of partitions that wait keep the slots' results fresh;
	// only a slot nobody waited for lately gets a barrier of its own (at
	// most ReplicaTimeout when its replicas are short).
	short := map[string]bool{}
	var unknown []int
	for s, ids := range bySlot {
		switch {
		case e.replicas.ShortFor(s, e.o.LeaseTTL):
			for _, id := range ids {
				short[id] = true
			}
		case !e.replicas.ConfirmedFor(s, e.o.LeaseTTL):
			unknown = append(unknown, s)
		}
	}
	for _, s := range e.replicas.Probe(ctx, unknown) {
		for _, id := range bySlot[s] {
			short[id] = true
		}
	}
	return short
}
