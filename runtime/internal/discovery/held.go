package discovery

import "time"

// An instance below its fair share tries to claim free units each
// discovery cycle; when the others hold their share there are none, and
// trying every held unit again each cycle would cost one acquire script
// per unit per cycle, forever (1,001 partitions on two instances: 501
// scripts a second). So a unit found held is skipped for a while: for
// LeaseTTL after the handler's picture last changed (a different number of
// live members, so shares move, or of units), one discovery interval, so a
// handover at the next message boundary is picked up at once; after that
// the hold doubles each time the unit is found held again, up to LeaseTTL.
// A change of the picture forgets every mark. A lease that ends without a
// change (its owner stalled past it) is tried again within LeaseTTL.

// heldMemo is one handler's units found held lately.
type heldMemo struct {
	live, units int64               // the picture they were found in
	since       time.Time           // when the picture last changed
	marks       map[string]heldMark // by unit id
}

// heldMark: not tried before until; hold is the last hold, to double.
type heldMark struct {
	until time.Time
	hold  time.Duration
}

// skipHeld reports whether unit id of handler was found held lately in
// the same picture; a changed picture forgets every mark.
func (d *Discovery) skipHeld(handler, id string, live, units int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.held[handler]
	if m == nil || m.live != live || m.units != units {
		m = &heldMemo{live: live, units: units, since: time.Now(), marks: map[string]heldMark{}}
		d.held[handler] = m
		return false
	}
	mark, ok := m.marks[id]
	return ok && time.Now().Before(mark.until)
}

// markHeld records that unit id of handler was found held (the marks are
// bounded by the handler's units, and end with the picture).
func (d *Discovery) markHeld(handler, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.held[handler]
	if m == nil {
		return
	}
	now, di := time.Now(), d.cfg.DiscoveryInterval
	hold := di
	if now.Sub(m.since) >= d.cfg.LeaseTTL {
		hold = min(max(2*m.marks[id].hold, di), d.cfg.LeaseTTL)
	}
	// Less half an interval: the mark is set after the acquire's round
	// trip, and the next cycle checks it sooner than that after its start.
	m.marks[id] = heldMark{until: now.Add(hold - di/2), hold: hold}
}

// claimedHeld forgets unit id's mark once it was claimed.
func (d *Discovery) claimedHeld(handler, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.held[handler]; m != nil {
		delete(m.marks, id)
	}
}
