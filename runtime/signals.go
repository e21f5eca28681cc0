package runtime

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Publishers wake a partition's owners alone (rdb/wake.go): each engine
// incarnation reads its own signal stream besides the categories' (the
// waiter). The engine creates that stream at Run, renews it with each
// heartbeat and deletes it as Run returns; publishers never create it, so
// a killed instance's ends with its TTL (rdb.OwnerSignalTTL) and a
// publish meant for it signals the category's stream instead.
//
// An unkeyed handler on a partitioned category runs on every instance,
// for every partition, so its instances need every publish's signal: the
// engine keeps the category's fanout marker (rdb.FanoutKey) set, and
// publishers signal the category's stream while it is.

// fanoutCategories lists, once each, the partitioned categories of cs that
// an unkeyed handler reads.
func fanoutCategories(cs []consumer) []string {
	var out []string
	for _, c := range cs {
		if c.mode == modeFan && !slices.Contains(out, c.category) {
			out = append(out, c.category)
		}
	}
	return out
}

// fanoutTTL is how long a fanout marker outlives the heartbeat that set
// it: two LeaseTTLs, so a late beat or two never lets it lapse.
func (e *Engine) fanoutTTL() time.Duration { return 2 * e.o.LeaseTTL }

// keepSignals renews this incarnation's signal stream and the fanout
// markers, at Run's start (before any worker) and each heartbeat. Every
// idle partition of a category wakes once to read (gap) when signals
// meant for it may have been missed: its own stream was lost with
// signals in it, or a marker lapsed or was lost (its value changed), when
// publishes may have signalled only the keyed owners. Only the heartbeat
// goroutine calls it after Run started.
func (e *Engine) keepSignals(ctx context.Context, first bool) {
	ctx, cancel := context.WithTimeout(ctx, e.o.HeartbeatInterval)
	defer cancel()
	var gaps []string
	created, err := rdb.KeepOwnerSignals(ctx, e.c, e.incarnation, 2*rdb.SignalBatch)
	if err != nil {
		e.log.Debug("seqby: renewing this instance's signal stream failed; the next heartbeat tries again", "err", err)
	}
	if created && !first {
		e.log.Debug("seqby: this instance's signal stream was gone; every idle partition reads once")
		gaps = e.wake.categories()
	}
	if len(e.fanout) > 0 {
		epoch := e.incarnation + "/" + strconv.FormatInt(time.Now().UnixNano(), 36) // new at each beat
		vals, err := rdb.KeepFanout(ctx, e.c, e.fanout, epoch, e.fanoutTTL())
		if err != nil {
			e.log.Debug("seqby: renewing the fanout markers failed; the next heartbeat tries again", "err", err)
		}
		for i, v := range vals {
			if v != e.fanoutSeen[i] {
				e.fanoutSeen[i] = v
				if !first {
					gaps = append(gaps, e.fanout[i])
				}
			}
		}
	}
	if len(gaps) > 0 {
		e.wake.mu.Lock()
		for _, cat := range gaps {
			e.wake.gap(cat)
		}
		e.wake.mu.Unlock()
	}
}

// categories are the categories whose signals the waiter follows.
func (w *waiter) categories() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, cat := range w.cats {
		if cat != "" {
			out = append(out, cat)
		}
	}
	return out
}
