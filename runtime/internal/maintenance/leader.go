package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// leading reports whether this instance holds the maintenance lease, as
// far as it knows; hold confirms it.
func (m *Maintenance) leading() bool { return m.lease != nil }

// hold reports whether this instance leads now: it takes the maintenance
// lease when it does not hold it, and renews it once a third of LeaseTTL
// has passed since the last renewal was sent. True means the lease holds
// for at least two thirds of LeaseTTL more, so the step that follows
// starts within its term. A renewal that fails for an error (not a
// refusal) keeps the lease for the next try, but says false meanwhile;
// once LeaseTTL has passed since the last renewal, the lease is gone.
// Only Run's goroutine calls it.
func (m *Maintenance) hold(base context.Context) bool {
	if m.lease == nil {
		return m.acquire(base)
	}
	if time.Since(m.renewed) < m.cfg.LeaseTTL/renewEach {
		return true
	}
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	sent := time.Now()
	err := m.lease.Renew(ctx, m.cfg.Client, m.cfg.LeaseTTL)
	switch {
	case err == nil:
		m.renewed = sent
		m.stats.renewals.Add(1)
		return true
	case errors.Is(err, rdb.ErrLeaseLost) || time.Since(m.renewed) >= m.cfg.LeaseTTL:
		m.lease = nil
		m.stats.losses.Add(1)
		m.cfg.Log.Warn("seqby: maintenance leader lost its lease; its pass stopped, and whoever leads next reaps", "err", err)
	default:
		m.cfg.Log.Warn("seqby: renewing the maintenance lease failed; no reaping until a renewal succeeds", "err", err)
	}
	return false
}

// acquire tries to take the maintenance lease, and reports whether it
// did.
func (m *Maintenance) acquire(base context.Context) bool {
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	ref := rdb.MaintenanceLease()
	sent := time.Now() // the lease's term runs from the acquire's send
	l, err := rdb.Acquire(ctx, m.cfg.Client, ref, m.cfg.Incarnation, m.cfg.LeaseTTL)
	if err != nil && m.cfg.Adopt != nil {
		// Held by this incarnation: the acquire ran twice (its reply was
		// lost and the client sent it again) or a release failed. Only
		// Run takes the lease, so it is this instance's to use rather
		// than a block for LeaseTTL.
		if own, ok := m.cfg.Adopt(ctx, ref, err, &sent); ok {
			l, err = own, nil
		}
	}
	if err != nil {
		if !errors.Is(err, rdb.ErrLeaseHeld) {
			m.cfg.Log.Warn("seqby: taking the maintenance lease failed; retried later", "err", err)
		}
		return false
	}
	m.lease, m.renewed = &l, sent
	m.stats.leads.Add(1)
	m.cfg.Log.Info("seqby: leading maintenance: this instance reaps every category", "token", l.Token())
	return true
}

// release gives the lease up, if held, so another engine leads at once.
func (m *Maintenance) release(base context.Context) {
	if m.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	if err := m.lease.Release(ctx, m.cfg.Client); err != nil {
		m.cfg.Log.Debug("seqby: releasing the maintenance lease failed; it expires", "err", err)
	}
	m.lease = nil
}
