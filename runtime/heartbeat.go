package runtime

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/lease"
)

// heartbeatLoop renews every owned lease each HeartbeatInterval in one
// pipeline, from its own goroutine, so renewals never wait behind a
// handler. A renew that finds the lease gone cancels the partition at once;
// one that fails on the network leaves the deadline timer to cancel it.
// The first beat is one HeartbeatInterval after Run starts (Run has just
// claimed the OwnerID): Health leaves last_renew out until then. A beat
// at Run's start was tried and undone: it announced a quickly stopped
// instance after LeaveMembers had taken it out, which kept it counted as
// live (and its deploy record) for LeaseTTL.
func (e *Engine) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(e.o.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		storeTime(&e.beatAt, time.Now())
		e.renewer.Renew(ctx)
		e.members.RenewOwner(ctx)
		e.signals.Keep(ctx, false)
		e.members.Announce(ctx, e.handlers)
		e.members.ReportFaults(ctx)
	}
}

// ownedCounts is how many partitions this instance owns per handler, not
// counting those it is losing or handing over (the unowned check trusts
// the sum): the instance record's Owned, for its announcements.
func (e *Engine) ownedCounts(handlers []string) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	by := map[string]int{}
	for _, p := range e.parts {
		if p.holding() {
			by[p.reg.Name]++
		}
	}
	out := make([]int, len(handlers))
	for i, h := range handlers {
		out[i] = by[h]
	}
	return out
}

// newLeases builds the partitions' leases from o (already defaulted),
// after the executor (its slots), the barrier, the waiter and the
// handler pauses they use.
func (e *Engine) newLeases(o Options) *lease.Leases {
	return lease.New(lease.Config{Client: e.c, Batch: e.batch, Wake: e.wake, Replicas: e.replicas, Telemetry: e.telemetry,
		Slots: e.exec.Slots(), Log: e.log, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, LeaseMargin: o.LeaseMargin, HeartbeatInterval: o.HeartbeatInterval, VerifyBound: o.VerifyBound,
		RetryBackoff: o.RetryBackoff, MaxBackoff: o.MaxBackoff, ReplicaAcks: o.ReplicaAcks, ReplicaTimeout: o.ReplicaTimeout,
		Paused: e.pauses.Paused})
}

// helds lists the leases of the owned partitions, for the Renewer.
func (e *Engine) helds() []*lease.Held {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*lease.Held, 0, len(e.parts))
	for _, p := range e.parts {
		out = append(out, p.held)
	}
	return out
}
