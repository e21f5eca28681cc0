package runtime

import (
	"context"
	"strings"
	"time"

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
// owner and is never reported. The per-unit look is skipped while the
// other live instances' recorded counts cover every unit this one does
// not own and nothing is marked yet: in a steady state the check costs
// two calls per LeaseTTL, not one per partition.

// othersOwnAll reports whether the live instances other than this one
// recorded owning at least n partitions of handler (rdb.OwnedByOthers):
// then none of the n is unowned but for a moment, and the check need not
// look at each one, which would cost a script per partition. Any doubt
// (an instance without a record, an error) answers false.
func (e *Engine) othersOwnAll(ctx context.Context, handler string, n int) bool {
	if n == 0 {
		return true
	}
	live, err := rdb.LiveMembers(ctx, e.c, handler, e.memberTTL())
	if err != nil {
		return false
	}
	sum, complete, err := rdb.OwnedByOthers(ctx, e.c, handler, e.o.OwnerID, live)
	return err == nil && complete && sum >= int64(n)
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
	for _, u := range units {
		if _, mine := e.parts[u.id]; !mine {
			others = append(others, u)
			checks = append(checks, rdb.OwnerCheck{Lease: u.ref, Lanes: u.lanes})
		}
	}
	marked := false
	for _, m := range e.unowned {
		marked = marked || m.handler == handler
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(base, e.o.LeaseTTL)
	defer cancel()
	if !marked && e.othersOwnAll(ctx, handler, len(others)) {
		return
	}
	states, unreadable, err := rdb.OwnerStates(ctx, e.c, handler, checks)
	if err != nil {
		e.log.Warn("seqby: checking for unowned partitions failed; retried next lease TTL", "handler", handler, "err", err)
		return
	}
	if unreadable != nil {
		e.log.Warn("seqby: checking a partition's owner failed; it counts as unowned with work", "handler", handler, "err", unreadable)
	}
	free := map[string]bool{}
	var report []Fault
	e.mu.Lock()
	for i, u := range others {
		if states[i] != rdb.FreeWithWork && states[i] != rdb.Unreadable {
			continue
		}
		free[u.id] = true
		m, seen := e.unowned[u.id]
		if !seen {
			e.unowned[u.id] = unownedMark{handler: handler, since: now}
			continue
		}
		fid := faultID(FaultUnowned, u.id)
		if _, reported := e.faults[fid]; reported || now.Sub(m.since) < e.UnownedAfter() {
			continue
		}
		f := Fault{Kind: FaultUnowned, Handler: handler, Category: strings.Join(u.cats, ","), Key: u.key,
			Stream: u.lanes[0], Since: m.since}
		e.faults[fid] = f
		report = append(report, f)
	}
	var recovered []Fault
	for id, m := range e.unowned {
		if m.handler != handler || free[id] {
			continue
		}
		delete(e.unowned, id)
		fid := faultID(FaultUnowned, id)
		if f, ok := e.faults[fid]; ok {
			recovered = append(recovered, f)
			delete(e.faults, fid)
		}
	}
	e.mu.Unlock()
	for _, f := range report {
		e.log.Error("seqby: partition has work and no owner; no instance running the handler manages to claim it. Check the other instances' logs (acquire failures, permanent redis errors) and that enough instances run the handler",
			"handler", f.Handler, "stream", f.Stream, "key", f.Key, "unowned_since", f.Since)
		e.alertFault(f)
	}
	for _, f := range recovered {
		e.log.Info("seqby: partition reported unowned has an owner again (or nothing left to do)", "handler", f.Handler, "stream", f.Stream, "key", f.Key)
	}
}
