package runtime

import "time"

// An instance below its fair share tries to claim free units each
// discovery cycle; when the others hold their share there are none, and
// trying every held unit again each cycle would cost one acquire script
// per unit per cycle, forever (1,001 partitions on two instances: 501
// scripts a second). So a unit found held is skipped for a while: one
// discovery interval after the first time, doubling each time it is found
// held again, up to LeaseTTL; the marks end when the handler's picture
// changes: a different number of live members (someone joined, left or
// died, so shares move) or of units. Handovers follow a change of the
// picture soon after it, while the holds are short; a lease that ends
// without a change (its owner stalled past it) is tried again within
// LeaseTTL.

// heldMemo is one handler's units found held lately.
type heldMemo struct {
	live, units int64               // the picture they were found in
	marks       map[string]heldMark // by unit id
}

// heldMark: not tried before until; hold is the last hold, to double.
type heldMark struct {
	until time.Time
	hold  time.Duration
}

// skipHeld reports whether unit id of handler was found held lately in
// the same picture; a changed picture forgets every mark. e.mu is not
// held by the caller.
func (e *Engine) skipHeld(handler, id string, live, units int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.held[handler]
	if m == nil || m.live != live || m.units != units {
		m = &heldMemo{live: live, units: units, marks: map[string]heldMark{}}
		e.held[handler] = m
		return false
	}
	mark, ok := m.marks[id]
	return ok && time.Now().Before(mark.until)
}

// markHeld records that unit id of handler was found held (the marks are
// bounded by the handler's units, and end with the picture).
func (e *Engine) markHeld(handler, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.held[handler]
	if m == nil {
		return
	}
	hold := min(max(2*m.marks[id].hold, e.o.DiscoveryInterval), e.o.LeaseTTL)
	m.marks[id] = heldMark{until: time.Now().Add(hold), hold: hold}
}

// claimedHeld forgets unit id's mark once it was claimed.
func (e *Engine) claimedHeld(handler, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.held[handler]; m != nil {
		delete(m.marks, id)
	}
}
