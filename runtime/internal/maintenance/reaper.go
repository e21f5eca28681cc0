package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// ReapEvery is how often an engine tries to reap its categories: half of
// ReapAfter, at least DiscoveryInterval, at most 5 minutes.
func (m *Maintenance) ReapEvery() time.Duration {
	return min(max(m.cfg.ReapAfter/2, m.cfg.DiscoveryInterval), 5*time.Minute)
}

// renewEach is the share of LeaseTTL after which a reaper pass renews
// its lease between two checks: by time, since a check's cost varies with
// the link and the load (counting checks, a pass over a slow link let the
// lease lapse and stopped early).
const renewEach = 3

// Run reaps cats (the engine's partitioned categories) every ReapEvery
// until stop.
func (m *Maintenance) Run(base context.Context, stop <-chan struct{}, cats []string) {
	if m.cfg.ReapAfter <= 0 {
		return
	}
	t := time.NewTicker(m.ReapEvery())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, cat := range cats {
			m.reapCategory(base, stop, cat)
		}
	}
}

// reapCategory is one reaper pass over a category, under its reaper
// lease: settle what an earlier reaper left half done, then reap every
// cold partition nobody owns. The lease only keeps instances from
// repeating each other's work: every step is safe to run twice.
func (m *Maintenance) reapCategory(base context.Context, stop <-chan struct{}, cat string) {
	c, ttl := m.cfg.Client, m.cfg.LeaseTTL
	op := func() (context.Context, context.CancelFunc) { return context.WithTimeout(base, 5*time.Second) }
	ctx, cancel := op()
	ref := rdb.ReaperLease(cat)
	renewed := time.Now() // the lease's term runs from the acquire's send
	l, err := rdb.Acquire(ctx, c, ref, m.cfg.Incarnation, ttl)
	if err != nil && m.cfg.Adopt != nil {
		// Held by this incarnation: the acquire ran twice (its reply was
		// lost and the client sent it again) or an earlier pass could not
		// release it. Only this loop takes the reaper lease, so it is
		// this pass's to use rather than a block for LeaseTTL.
		var sent time.Time
		if own, ok := m.cfg.Adopt(ctx, ref, err, &sent); ok {
			l, err, renewed = own, nil, sent
		}
	}
	cancel()
	if err != nil {
		if !errors.Is(err, rdb.ErrLeaseHeld) {
			m.cfg.Log.Warn("seqby: reaper could not take its lease; retried next pass", "category", cat, "err", err)
		}
		return
	}
	defer func() {
		ctx, cancel := op()
		l.Release(ctx, c)
		cancel()
	}()
	var groups, keys []string
	err = func() error {
		ctx, cancel := op()
		defer cancel()
		if _, err := rdb.SettleReaping(ctx, c, cat, m.cfg.BackfillSuffix); err != nil {
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
		return
	}
	reaped := 0
	for _, k := range keys {
		if time.Since(renewed) >= ttl/renewEach {
			sent := time.Now()
			ctx, cancel := op()
			err := l.Renew(ctx, c, ttl)
			cancel()
			if err != nil {
				m.cfg.Log.Warn("seqby: reaper lost its lease; pass stopped", "category", cat, "err", err)
				break
			}
			renewed = sent
		}
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := op()
		ok, err := rdb.Reap(ctx, c, cat, k, m.cfg.BackfillSuffix, groups, m.cfg.ReapAfter)
		cancel()
		if err != nil {
			m.cfg.Log.Warn("seqby: reaping a partition failed; retried next pass", "category", cat, "partition", k, "err", err)
			continue
		}
		if ok {
			reaped++
		}
	}
	if reaped > 0 {
		m.cfg.Invalidate(cat)
		m.cfg.Log.Info("seqby: reaped cold partitions", "category", cat, "reaped", reaped, "partitions", len(keys))
	}
}
