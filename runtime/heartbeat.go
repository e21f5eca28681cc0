package runtime

import (
	"context"
	"time"
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
