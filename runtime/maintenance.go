package runtime

import "time"

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
