package maintenance

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// One maintenance leader reaps for every engine. Each engine announces
// the partitioned categories it reads, with its ReapAfter and
// BackfillSuffix, in one sorted set (rdb.AnnounceReap, every ReapEvery);
// the instance holding the maintenance lease (rdb.MaintenanceLease) reaps
// every category announced within categoriesTTL, each with the largest
// ReapAfter announced for it, so a partition is reaped only once it is
// cold by the measure of every engine reading it, and with every backfill
// lane any of them reads, so none is left behind holding entries. Any
// engine with reaping on may lead, and whichever leads reaps the
// categories of all, including those it does not read itself: an engine
// that never leads still has its categories reaped. An engine with
// reaping off (ReapAfter < 0) announces nothing and never leads; its
// categories are reaped only if another engine reading them has reaping
// on, as before the leader.
//
// The lease only keeps instances from repeating each other's work, as
// the reaper lease per category did before it: no step rests on it
// (rdb.Reap's doc shows why two reapers at once are safe, which is also
// what a rolling deploy from a release with reaper leases per category
// runs for a while). Still, a leader writes only while it holds the
// lease: it renews it by time, every third of LeaseTTL counted from the
// renewal's send, before its next step (so every step starts within the
// lease's term), and stops its pass once a renewal fails; the lease's
// generation fences a stale leader's renewal (one stalled past its term,
// whose lease another took).

// categoriesTTL is how long a category stays on the leader's list after
// an engine last announced it: three of the longest ReapEvery, so an
// engine that misses two announcements keeps its categories reaped.
const categoriesTTL = 15 * time.Minute

// ReapEvery is how often an engine announces its categories and, while
// it leads, reaps them all: half of ReapAfter, at least DiscoveryInterval,
// at most 5 minutes.
func (m *Maintenance) ReapEvery() time.Duration {
	return min(max(m.cfg.ReapAfter/2, m.cfg.DiscoveryInterval), 5*time.Minute)
}

// renewEach is the share of LeaseTTL after which the leader renews its
// lease: by time, since a check's cost varies with the link and the load
// (counting checks, a pass over a slow link let the lease lapse and
// stopped early).
const renewEach = 3

// Run runs this engine's part of maintenance until stop: it announces
// cats (the partitioned categories the engine reads) for reaping every
// ReapEvery, tries to take the maintenance lease (every third of
// LeaseTTL while another holds it), and while it leads renews the lease
// and reaps every announced category every ReapEvery. It releases the
// lease when stop closes, so another engine leads at once. With reaping
// off it returns at once.
func (m *Maintenance) Run(base context.Context, stop <-chan struct{}, cats []string) {
	if m.cfg.ReapAfter <= 0 {
		return
	}
	every := m.ReapEvery()
	mine := make([]rdb.ReapCategory, len(cats))
	for i, c := range cats {
		mine[i] = rdb.ReapCategory{Category: c, ReapAfter: m.cfg.ReapAfter, Backfill: []string{m.cfg.BackfillSuffix}}
	}
	defer m.release(base)
	var announced time.Time
	nextPass := time.Now().Add(every)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-timer.C:
		}
		if time.Since(announced) >= every {
			announced = time.Now()
			m.announce(base, mine)
		}
		if m.hold(base) && !time.Now().Before(nextPass) {
			m.pass(base, stop)
			nextPass = time.Now().Add(every)
		}
		wait := min(m.cfg.LeaseTTL/renewEach, time.Until(announced.Add(every)))
		if m.leading() {
			// Wake when the renewal is due, not a third of LeaseTTL from
			// now: a renewal that came just short of due would otherwise
			// wait until two thirds of the term had passed.
			wait = min(wait, time.Until(nextPass), time.Until(m.renewed.Add(m.cfg.LeaseTTL/renewEach)))
		}
		timer.Reset(max(wait, time.Millisecond))
	}
}

// announce records this engine's categories for the leader.
func (m *Maintenance) announce(base context.Context, mine []rdb.ReapCategory) {
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	if _, err := rdb.AnnounceReap(ctx, m.cfg.Client, mine, categoriesTTL); err != nil {
		m.cfg.Log.Warn("seqby: announcing the categories to reap failed; retried later", "err", err)
	}
}

// pass is one leader's pass: every category announced lately, each with
// its ReapAfter, until the pass is done, stop closes, or the lease is
// lost.
func (m *Maintenance) pass(base context.Context, stop <-chan struct{}) {
	start := time.Now()
	renewals := m.stats.renewals.Load()
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	cats, err := rdb.AnnounceReap(ctx, m.cfg.Client, nil, categoriesTTL)
	cancel()
	if err != nil {
		m.cfg.Log.Warn("seqby: reading the categories to reap failed; retried next pass", "err", err)
		return
	}
	checked, reaped := 0, 0
	for _, rc := range cats {
		n, r, done := m.reapCategory(base, stop, rc)
		checked, reaped = checked+n, reaped+r
		if !done {
			return
		}
	}
	took := time.Since(start)
	m.stats.passes.Add(1)
	log := m.cfg.Log.Debug
	if reaped > 0 {
		log = m.cfg.Log.Info
	}
	log("seqby: maintenance pass", "categories", len(cats), "partitions", checked, "reaped", reaped,
		"took", took, "renewals", m.stats.renewals.Load()-renewals)
}

// reapCategory reaps one category: settle what an earlier reaper left
// half done, then reap every cold partition nobody owns. It returns how
// many partitions it checked and reaped, and done false when the pass
// must stop (stop closed, or the lease is lost).
func (m *Maintenance) reapCategory(base context.Context, stop <-chan struct{}, rc rdb.ReapCategory) (checked, reaped int, done bool) {
	c, cat := m.cfg.Client, rc.Category
	op := func() (context.Context, context.CancelFunc) { return context.WithTimeout(base, 5*time.Second) }
	if !m.hold(base) {
		return 0, 0, false
	}
	var groups, keys []string
	err := func() error {
		ctx, cancel := op()
		defer cancel()
		if err := rdb.EndLegacyReaper(ctx, c, cat, m.cfg.LeaseTTL); err != nil {
			m.cfg.Log.Debug("seqby: ending the reaper lease counter of an older release failed", "category", cat, "err", err)
		}
		if _, err := rdb.SettleReaping(ctx, c, cat, rc.Backfill); err != nil {
			return err
		}
		var err error
		if groups, err = rdb.Groups(ctx, c, cat); err != nil {
			return err
		}
		keys, err = rdb.Partitions(ctx, c, cat)
		return err
	}()
	if err != nil {
		m.cfg.Log.Warn("seqby: reaper pass failed; retried next pass", "category", cat, "err", err)
		return 0, 0, true
	}
	defer func() {
		if reaped > 0 {
			m.cfg.Invalidate(cat)
			m.stats.reaped.Add(int64(reaped))
		}
	}()
	for _, k := range keys {
		select {
		case <-stop:
			return checked, reaped, false
		default:
		}
		if m.beforeReap != nil {
			m.beforeReap(k)
		}
		if !m.hold(base) {
			return checked, reaped, false
		}
		ctx, cancel := op()
		ok, err := rdb.Reap(ctx, c, cat, k, rc.Backfill, groups, rc.ReapAfter)
		cancel()
		checked++
		if err != nil {
			m.cfg.Log.Warn("seqby: reaping a partition failed; retried next pass", "category", cat, "partition", k, "err", err)
			continue
		}
		if ok {
			reaped++
		}
	}
	return checked, reaped, true
}
