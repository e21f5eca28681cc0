package maintenance

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
// (Config.Report: log, OnFault, Status.Faults). A unit without work (a
// cold partition left for the reaper, one its handler has drained) needs
// no owner and is never reported, and none is reported while the number
// of partitions owned across the instances grows from one check to the
// next (they are still claiming). The per-unit look is skipped while the
// other live instances' recorded counts cover every unit this one does
// not own and nothing is marked yet: in a steady state the check costs
// two calls per LeaseTTL, not one per partition.

// Unit is one partition (or a pm's correlation value) of a handler, as
// discovery lists it.
type Unit struct {
	// ID names the unit among all handlers' (the engine's partition id).
	ID string
	// Ref is its lease.
	Ref rdb.LeaseRef
	// Key is its partition key (or correlation value).
	Key string
	// Cats and Lanes are the streams the lease covers, and the category
	// of each.
	Cats, Lanes []string
}

// unownedMark is a unit seen without an owner, since when.
type unownedMark struct {
	handler string
	since   time.Time
	// waiting: last seen aged while the strict mode waited for the
	// partition's replicas; its time without an owner counts afresh.
	waiting bool
	// reported is the fault Report got, nil before; Clear gets its id
	// when the unit is owned again.
	reported *membership.Fault
}

// UnownedAfter is how long a partition with work may stay without an owner
// before it is reported: two lease TTLs (a crashed owner's lease expires)
// plus two discovery intervals (someone claims it). It is noticed within
// one more LeaseTTL, the period of the check.
func (m *Maintenance) UnownedAfter() time.Duration {
	return 2*m.cfg.LeaseTTL + 2*m.cfg.DiscoveryInterval
}

// Checked returns how many of handler's units are marked unowned, and
// when the handler was last checked.
func (m *Maintenance) Checked(handler string) (marks int, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range m.unowned {
		if u.handler == handler {
			marks++
		}
	}
	return marks, m.checkedAt[handler]
}

// ownedByOthers sums how many of handler's partitions the live instances
// other than this one recorded owning (rdb.OwnedByOthers). When that
// covers every partition this one does not own, none is unowned but for a
// moment, and the check need not look at each one, which would cost a
// script per partition. complete is false on any doubt (an instance
// without a record, an error).
func (m *Maintenance) ownedByOthers(ctx context.Context, handler string) (sum int64, complete bool) {
	live, err := rdb.LiveMembers(ctx, m.cfg.Client, handler, m.cfg.MemberTTL)
	if err != nil {
		return 0, false
	}
	sum, complete, err = rdb.OwnedByOthers(ctx, m.cfg.Client, handler, m.cfg.Owner, live)
	return sum, err == nil && complete
}

// CheckUnowned runs the check for handler's units, at most once per
// LeaseTTL, on its own deadline; discovery calls it after a cycle's
// claims. The marks are bounded by the units in the indexes: a unit
// owned again, without work, or gone from the index is forgotten.
func (m *Maintenance) CheckUnowned(base context.Context, handler string, units []Unit) {
	now := time.Now()
	m.mu.Lock()
	if now.Sub(m.checkedAt[handler]) < m.cfg.LeaseTTL {
		m.mu.Unlock()
		return
	}
	m.checkedAt[handler] = now
	marked := false
	for _, u := range m.unowned {
		marked = marked || u.handler == handler
	}
	m.mu.Unlock()
	ids := make([]string, len(units))
	for i, u := range units {
		ids[i] = u.ID
	}
	owned, mine := m.cfg.Owned(ids)
	var checks []rdb.OwnerCheck
	var others []Unit
	for i, u := range units {
		if !owned[i] {
			others = append(others, u)
			checks = append(checks, rdb.OwnerCheck{Lease: u.Ref, Lanes: u.Lanes})
		}
	}
	ctx, cancel := context.WithTimeout(base, m.cfg.LeaseTTL)
	defer cancel()
	sum, complete := m.ownedByOthers(ctx, handler)
	// Covered: the counts say every partition is owned, so the ones
	// marked earlier (seen free while the instances were still claiming)
	// are owned now; their marks go without a look at each partition.
	covered := complete && sum >= int64(len(others))
	if covered && !marked {
		if m.cfg.Replicas != nil {
			m.cfg.Replicas.NoteUnowned(handler, 0)
		}
		return
	}
	// More partitions owned than at the last check: the instances are
	// still claiming (a start with many partitions takes a while), so the
	// free ones wait their turn rather than being stuck. The marks are
	// kept; the report waits for a check that sees no progress.
	m.mu.Lock()
	growing := complete && mine+sum > m.ownedTotal[handler]
	if complete {
		m.ownedTotal[handler] = mine + sum
	}
	m.mu.Unlock()
	var states []rdb.Ownership
	if !covered {
		var unreadable, err error
		states, unreadable, err = rdb.OwnerStates(ctx, m.cfg.Client, handler, checks)
		if err != nil {
			m.cfg.Log.Warn("seqby: checking for unowned partitions failed; retried next lease TTL", "handler", handler, "err", err)
			return
		}
		if unreadable != nil {
			m.cfg.Log.Warn("seqby: checking a partition's owner failed; it counts as unowned with work", "handler", handler, "err", unreadable)
		}
	}
	short := m.unownedShort(ctx, handler, others, states, covered)
	free := map[string]bool{}
	var report []membership.Fault
	var reportIDs []string
	var recovered []unownedMark
	var recoveredIDs []string
	waiting := 0 // unowned for a while, and waiting for replicas
	m.mu.Lock()
	for i, u := range others {
		if covered || states[i] != rdb.FreeWithWork && states[i] != rdb.Unreadable {
			continue
		}
		free[u.ID] = true
		mk, seen := m.unowned[u.ID]
		if !seen {
			m.unowned[u.ID] = unownedMark{handler: handler, since: now}
			continue
		}
		if mk.reported != nil || growing || now.Sub(mk.since) < m.UnownedAfter() {
			continue
		}
		if short[u.ID] {
			// Unowned while the strict mode waits for its replicas:
			// that is what it waits for (said once, below), and its time
			// without an owner counts from the end of the wait.
			m.unowned[u.ID] = unownedMark{handler: handler, since: now, waiting: true}
			continue
		}
		f := membership.Fault{Kind: membership.FaultUnowned, Handler: handler,
			Category: strings.Join(u.Cats, ","), Key: u.Key, Stream: u.Lanes[0], Since: mk.since}
		mk.reported = &f
		m.unowned[u.ID] = mk
		report = append(report, f)
		reportIDs = append(reportIDs, u.ID)
	}
	for id, mk := range m.unowned {
		if mk.handler == handler && mk.waiting && free[id] {
			waiting++
		}
	}
	for id, mk := range m.unowned {
		if mk.handler != handler || free[id] {
			continue
		}
		delete(m.unowned, id)
		if mk.reported != nil {
			recovered, recoveredIDs = append(recovered, mk), append(recoveredIDs, id)
		}
	}
	m.mu.Unlock()
	if m.cfg.Replicas != nil {
		m.cfg.Replicas.NoteUnowned(handler, waiting)
	}
	for i, f := range report {
		m.cfg.Log.Error("seqby: partition has work and no owner; no instance running the handler manages to claim it. Check the other instances' logs (acquire failures, permanent redis errors) and that enough instances run the handler",
			"handler", f.Handler, "stream", f.Stream, "key", f.Key, "unowned_since", f.Since)
		m.cfg.Report(reportIDs[i], f)
	}
	for i, mk := range recovered {
		m.cfg.Clear(recoveredIDs[i])
		f := mk.reported
		m.cfg.Log.Info("seqby: partition reported unowned has an owner again (or nothing left to do)", "handler", f.Handler, "stream", f.Stream, "key", f.Key)
	}
}

// unownedShort, in the strict mode, returns the partitions about to be
// reported unowned (free with work, marked for UnownedAfter) whose
// primary's last barrier, or one sent now where none ran lately, failed
// or came back short: they have no owner because the strict mode waits for
// their replicas (their owners lose each lease they take, or are
// refused), which is not a fault of the instances; CheckUnowned says so
// once instead of an error per key. Nil in the default mode.
func (m *Maintenance) unownedShort(ctx context.Context, handler string, others []Unit, states []rdb.Ownership, covered bool) map[string]bool {
	reps := m.cfg.Replicas
	if reps == nil || covered {
		return nil
	}
	now := time.Now()
	bySlot := map[int][]string{}
	m.mu.Lock()
	for i, u := range others {
		mk, seen := m.unowned[u.ID]
		if (states[i] == rdb.FreeWithWork || states[i] == rdb.Unreadable) && seen && mk.handler == handler && now.Sub(mk.since) >= m.UnownedAfter() {
			s := reps.SlotOf(u.Ref.Key)
			bySlot[s] = append(bySlot[s], u.ID)
		}
	}
	m.mu.Unlock()
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
		case reps.ShortFor(s, m.cfg.LeaseTTL):
			for _, id := range ids {
				short[id] = true
			}
		case !reps.ConfirmedFor(s, m.cfg.LeaseTTL):
			unknown = append(unknown, s)
		}
	}
	for _, s := range reps.Probe(ctx, unknown) {
		for _, id := range bySlot[s] {
			short[id] = true
		}
	}
	return short
}
