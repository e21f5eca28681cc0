package runtime

import (
	"time"

	"github.com/seqby/seqby/runtime/internal/discovery"
	"github.com/seqby/seqby/runtime/internal/maintenance"
	"github.com/seqby/seqby/runtime/internal/membership"
)

// newMaintenance builds the engine's maintenance (reaping, retention, the
// unowned check) from o (already defaulted), after the instance record
// and the barrier it reports to. The owned set stays e's.
func (e *Engine) newMaintenance(o Options, index *discovery.Index) *maintenance.Maintenance {
	return maintenance.New(maintenance.Config{Client: e.c, Owner: o.OwnerID, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, DiscoveryInterval: o.DiscoveryInterval, ReapAfter: o.ReapAfter,
		BackfillSuffix: o.BackfillSuffix, MemberTTL: e.members.MemberTTL(), Log: e.log, Replicas: e.replicas,
		Adopt: e.leases.Adopt, Invalidate: index.Invalidate, Owned: e.ownedUnits,
		Report: func(id string, f membership.Fault) {
			e.members.AddFault(id, f)
			e.alertFault(faultOf(f))
		},
		Clear: func(id string) { e.members.RemoveFault(membership.FaultUnowned, id) }})
}

// UnownedAfter is how long a partition with work may stay without an owner
// before it is reported: two lease TTLs (a crashed owner's lease expires)
// plus two discovery intervals (someone claims it). It is noticed within
// one more LeaseTTL, the period of the check.
func (e *Engine) UnownedAfter() time.Duration { return e.maint.UnownedAfter() }

// ownedUnits tells, per unit id, whether this instance owns it, and how
// many of them its workers hold (the unowned check's Owned).
func (e *Engine) ownedUnits(ids []string) (owned []bool, holding int64) {
	owned = make([]bool, len(ids))
	for i, id := range ids {
		w, ok := e.workers.Get(id)
		owned[i] = ok
		if ok && w.Holding() {
			holding++
		}
	}
	return owned, holding
}
