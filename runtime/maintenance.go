package runtime

import "time"

// UnownedAfter is how long a partition with work may stay without an owner
// before it is reported: two lease TTLs (a crashed owner's lease expires)
// plus two discovery intervals (someone claims it). It is noticed within
// one more LeaseTTL, the period of the check.
func (e *Engine) UnownedAfter() time.Duration { return e.maint.UnownedAfter() }
