package runtime

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
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
		e.renewAll(ctx)
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

// renewFailure is one handler's leases whose renew failed in a heartbeat
// (but for being lost or refused): a Redis outage fails them all at once,
// and one line per handler says so (n leases, the first one's stream and
// error) where one per lease would repeat it for every partition, every
// heartbeat, until the leases are lost.
type renewFailure struct {
	n      int
	stream string
	err    error
}

func (e *Engine) renewAll(ctx context.Context) {
	e.mu.Lock()
	parts := make([]*partition, 0, len(e.parts))
	for _, p := range e.parts {
		if p.ctx.Err() == nil {
			parts = append(parts, p)
		}
	}
	e.mu.Unlock()
	if len(parts) == 0 {
		storeTime(&e.renewOK, time.Now())
		return
	}
	leases := make([]rdb.Lease, len(parts), len(parts)+1)
	for i, p := range parts {
		leases[i] = p.lease
	}
	// The attempt marks of halted heads being retried live as long as
	// their leases (attempt.go): renewed in the same call, after the
	// leases, their errors ignored (a mark ends with its attempt).
	for _, p := range parts {
		if p.marked.Load() {
			leases = append(leases, p.lease.AttemptMark())
		}
	}
	for try := 0; try < 2; try++ {
		rctx, cancel := context.WithTimeout(ctx, e.o.HeartbeatInterval)
		sent := time.Now()
		errs, named := rdb.RenewAll(rctx, e.c, leases, e.o.LeaseTTL)
		answered := time.Now()
		cancel()
		e.telemetry.RenewDuration(ctx, time.Since(sent))
		errs = errs[:len(parts)]
		e.renewedAt(sent, errs)
		noscript := false
		failed := map[string]*renewFailure{} // by handler: one line each, not one per lease
		var confirm []*partition             // renewed, for the strict mode's barrier
		for i, err := range errs {
			switch {
			case err == nil:
				parts[i].renewErrs = 0
				// A stream the renewal named this owner in, which it did
				// not know named, wakes the partition once (named.go).
				parts[i].renewedNamed(named[i])
				if e.replicas != nil {
					confirm = append(confirm, parts[i])
				} else {
					parts[i].renewed(sent)
				}
			case rdb.IsNoScript(err):
				noscript = true
			case errors.Is(err, ErrLeaseLost):
				parts[i].lost(err)
			case rdb.Permanent(err):
				// Renewing cannot succeed (an ACL rule, a key holding
				// something else): after PermanentRedisErrors, hand over at
				// the next boundary and bench the partition, rather than
				// lose the lease each TTL and claim it again (retryable).
				parts[i].renewErrs++
				e.log.Warn("seqby: lease renew refused", "handler", parts[i].reg.Name, "stream", parts[i].lanes[0], "errors", parts[i].renewErrs, "err", err)
				if parts[i].renewErrs >= PermanentRedisErrors && !parts[i].releasing() {
					e.releaseFaulted(parts[i], err)
					parts[i].requestRelease()
				}
			default:
				f := failed[parts[i].reg.Name]
				if f == nil {
					f = &renewFailure{stream: parts[i].lanes[0], err: err}
					failed[parts[i].reg.Name] = f
				}
				f.n++
			}
		}
		if len(confirm) > 0 {
			keys := make([]string, len(confirm))
			for i, p := range confirm {
				keys[i] = p.lease.Ref.Key
			}
			e.replicas.ConfirmRenewals(ctx, keys, sent, answered, e.o.LeaseTTL, func(i int) { confirm[i].renewed(sent) })
		}
		for _, handler := range slices.Sorted(maps.Keys(failed)) {
			f := failed[handler]
			e.log.Warn("seqby: lease renew failed; will retry", "handler", handler, "failed", f.n,
				"stream", f.stream, "err", f.err)
		}
		if !noscript {
			return
		}
		// Redis lost its script cache (restart, SCRIPT FLUSH): reload, redo.
		if err := rdb.LoadScripts(ctx, e.c); err != nil {
			e.log.Warn("seqby: reloading scripts failed", "err", err)
			return
		}
	}
}
