package unkeyed

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// drainPending processes this consumer's own pending entries (left by a
// restart under the same name) before new ones, except those it halted on.
func (u *worker) drainPending() {
	for _, l := range u.lanes {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		ens, err := rdb.ReadGroup(ctx, u.r.cfg.Client, l, u.handler, u.r.cfg.Owner, "0", 100, -1)
		cancel()
		if err != nil {
			continue
		}
		for _, en := range ens {
			u.process(en)
		}
	}
}

// claimStale takes over the entries of consumers that are not live
// (pending at least LeaseTTL) and processes them, deletes such consumers
// once they have nothing pending, and re-runs this consumer's own entries
// left pending by a failed ack. Never touches a live consumer, nor an
// entry this instance halted on.
func (u *worker) claimStale() {
	r := u.r
	ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
	live, err := r.liveMembers(ctx, u.st, u.handler)
	cancel()
	if err != nil {
		r.cfg.Log.Warn("seqby: cannot tell dead consumers from live ones; not claiming", "handler", u.handler, "err", err)
		return
	}
	for _, l := range u.lanes {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		cons, err := rdb.Consumers(ctx, r.cfg.Client, l, u.handler)
		cancel()
		if err != nil {
			continue // no such lane or group yet
		}
		for _, c := range cons {
			select {
			case <-u.stop:
				return
			default:
			}
			switch {
			case c.Name == r.cfg.Owner:
				if c.Pending > 0 {
					u.retryOwn(l)
				}
			case live[c.Name]:
			default:
				if c.Pending > 0 && !u.claimFrom(l, c.Name) {
					continue
				}
				u.deleteConsumer(l, c.Name)
			}
		}
	}
}

// claimFrom claims and processes the entries a dead consumer left pending
// on lane; false when some stay (not idle long enough, or an error).
func (u *worker) claimFrom(lane, from string) bool {
	r := u.r
	for {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		ids, err := rdb.PendingIDs(ctx, r.cfg.Client, lane, u.handler, from, r.cfg.LeaseTTL, "-", 100)
		cancel()
		if err != nil {
			r.cfg.Log.Warn("seqby: listing a dead consumer's entries failed", "handler", u.handler, "stream", lane, "consumer", from, "err", err)
			return false
		}
		if len(ids) == 0 {
			return true // or all younger than LeaseTTL: the delete keeps it
		}
		ctx, cancel = context.WithTimeout(u.base, 5*time.Second)
		// MinIdle again: if the consumer came back and read one, it keeps it.
		msgs, err := rdb.Claim(ctx, r.cfg.Client, lane, u.handler, r.cfg.Owner, r.cfg.LeaseTTL, ids)
		cancel()
		if err != nil {
			r.cfg.Log.Warn("seqby: claiming a dead consumer's entries failed", "handler", u.handler, "stream", lane, "consumer", from, "err", err)
			return false
		}
		r.cfg.Log.Info("seqby: claimed entries of a dead consumer", "handler", u.handler, "stream", lane, "consumer", from, "entries", len(msgs))
		for _, m := range msgs {
			select {
			case <-u.stop:
				return false
			default:
			}
			u.process(m)
		}
		if len(ids) < 100 {
			return true
		}
	}
}

// retryOwn re-runs this consumer's own pending entries idle at least
// LeaseTTL that it did not halt on: an ack that failed after the handler
// succeeded. Each lane has a single worker per instance, so nothing of
// its own is in flight while it runs this.
func (u *worker) retryOwn(lane string) {
	r := u.r
	start := "-"
	for page := 0; page < 10; page++ {
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		pend, err := rdb.PendingIDs(ctx, r.cfg.Client, lane, u.handler, r.cfg.Owner, r.cfg.LeaseTTL, start, 100)
		cancel()
		if err != nil || len(pend) == 0 {
			return
		}
		var ids []string
		for _, id := range pend {
			if !u.st.isHalted(lane, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			ctx, cancel = context.WithTimeout(u.base, 5*time.Second)
			msgs, err := rdb.Claim(ctx, r.cfg.Client, lane, u.handler, r.cfg.Owner, r.cfg.LeaseTTL, ids)
			cancel()
			if err != nil {
				return
			}
			for _, m := range msgs {
				u.process(m)
			}
		}
		if len(pend) < 100 {
			return
		}
		start = "(" + pend[len(pend)-1]
	}
}

// deleteConsumer removes a dead consumer with nothing pending from the
// group (atomically: it is kept if it has anything pending by then).
func (u *worker) deleteConsumer(lane, name string) {
	ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
	defer cancel()
	deleted, err := rdb.DeleteIdleConsumer(ctx, u.r.cfg.Client, lane, u.handler, name)
	if err != nil {
		u.r.cfg.Log.Warn("seqby: deleting a dead consumer failed", "handler", u.handler, "stream", lane, "consumer", name, "err", err)
		return
	}
	if deleted {
		u.r.cfg.Log.Debug("seqby: deleted a dead consumer", "handler", u.handler, "stream", lane, "consumer", name)
	}
}
