package unkeyed

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Fans are the running workers of unkeyed handlers on partitioned
// categories, one per partition, by handler and stream. One discovery
// loop keeps them (Sync), so they need no lock.
type Fans struct {
	r       *Runner
	running map[string]*fan
}

// fan is a running worker of an unkeyed handler on one partition.
type fan struct {
	quit   chan struct{} // closed when the partition left the index
	exited chan struct{} // closed when the worker returned
}

// Fans returns an empty set of fan workers, for one Run's discovery loop.
func (r *Runner) Fans() *Fans { return &Fans{r: r, running: map[string]*fan{}} }

// fanID names a handler's worker on a partition's stream.
func fanID(handler, stream string) string { return handler + "\x00" + stream }

// Sync starts a worker for every partition of category that handler does
// not read yet, found through the index, and stops the workers of
// partitions no longer in it (reaped), so their number follows the index.
// Workers stop on stop too; wg counts them.
func (f *Fans) Sync(base context.Context, stop <-chan struct{}, handler, category string, wg *sync.WaitGroup) {
	r := f.r
	ctx, cancel := context.WithTimeout(base, max(r.cfg.DiscoveryInterval, time.Second))
	keys, err := r.cfg.Partitions(ctx, category)
	cancel()
	if err != nil {
		r.cfg.Log.Warn("seqby: reading the partition index failed", "category", category, "err", err)
		return
	}
	present := map[string]bool{}
	for _, k := range keys {
		present[fanID(handler, rdb.PartitionStream(category, k))] = true
	}
	prefix := fanID(handler, category+":{")
	for id, w := range f.running {
		if !strings.HasPrefix(id, prefix) {
			continue // another consumer's
		}
		select {
		case <-w.exited:
			delete(f.running, id) // started again below if its key is back
			continue
		default:
		}
		if !present[id] {
			select {
			case <-w.quit:
			default:
				close(w.quit)
			}
		}
	}
	for _, k := range keys {
		id := fanID(handler, rdb.PartitionStream(category, k))
		if f.running[id] != nil || r.cfg.KeyRule(category, "", k, r.cfg.BackfillSuffix) != nil {
			continue
		}
		w := &fan{quit: make(chan struct{}), exited: make(chan struct{})}
		f.running[id] = w
		halt := make(chan struct{})
		u := r.newWorker(base, halt, handler, category, k,
			[]string{rdb.PartitionStream(category, k), rdb.BackfillStream(category, k, r.cfg.BackfillSuffix)})
		// Join before the goroutine starts, so the instance is announced
		// before its first read of the partition.
		u.st = r.join(base, handler)
		wg.Add(2)
		go func() {
			// The worker stops on the engine's stop or its own quit.
			defer wg.Done()
			select {
			case <-stop:
			case <-w.quit:
			case <-w.exited:
			}
			close(halt)
		}()
		go func() {
			defer wg.Done()
			defer close(w.exited)
			defer r.leave(handler)
			u.runFan()
		}()
	}
}

// fanClaimInterval is how often a partition's worker looks for dead
// consumers. Their entries become claimable only LeaseTTL after their
// last heartbeat, and each check costs one XINFO per lane per partition,
// so an idle instance with many partitions checks each about once per
// LeaseTTL (a dead consumer's entries are taken within 2 LeaseTTLs).
func (u *worker) fanClaimInterval() time.Duration {
	return max(u.r.cfg.DiscoveryInterval, u.r.cfg.LeaseTTL)
}

// runFan reads one partition's lanes in an unkeyed handler's group.
func (u *worker) runFan() {
	r := u.r
	for _, l := range u.lanes {
		r.ensureGroup(u.base, l, u.handler, false)
	}
	u.claimStale()
	u.drainPending()
	// Spread the checks of partitions started together over the interval.
	lastClaim := time.Now().Add(-rand.N(max(u.fanClaimInterval()/2, 1)))
	backoff := r.cfg.RetryBackoff
	for {
		select {
		case <-u.stop:
			return
		default:
		}
		if time.Since(lastClaim) >= u.fanClaimInterval() {
			u.claimStale()
			lastClaim = time.Now()
		}
		seq := r.cfg.Wake.Mark(u.category, u.key)
		got, failed := false, false
		for _, l := range u.lanes {
			ens, err := u.readNew(l)
			if rdb.IsNoGroup(err) {
				// The lane's first entry arrived after the worker started
				// (typically a first backfill entry): its signal is already
				// counted, so read it now rather than wait for another.
				// A lane that does not exist yet leaves err nil: empty.
				var ok bool
				if ok, err = r.createGroup(u.base, l, u.handler, false); ok {
					ens, err = u.readNew(l)
				}
			}
			if err != nil {
				r.cfg.Log.Warn("seqby: read failed; retrying", "handler", u.handler, "stream", l, "err", err)
				failed = true
				continue
			}
			for _, en := range ens {
				got = true
				u.process(en)
			}
			if got {
				break
			}
		}
		if got {
			backoff = r.cfg.RetryBackoff
			u.trims.TrimIf(u.base, false)
			continue
		}
		if failed {
			// A lane may hold entries whose signal was already counted:
			// retry the reads after a backoff instead of waiting for one.
			if !sleepOr(u.stop, backoff) {
				return
			}
			backoff = min(2*backoff, r.cfg.MaxBackoff)
			continue
		}
		backoff = r.cfg.RetryBackoff
		u.trims.TrimIf(u.base, true)
		wait := min(r.cfg.IdleRecheck, max(time.Until(lastClaim.Add(u.fanClaimInterval())), time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-r.cfg.Wake.Wait(u.category, u.key, seq):
		case <-u.stop:
			t.Stop()
			return
		case <-t.C:
		}
		t.Stop()
	}
}

// readNew reads the next new entry of lane without blocking (the waiter
// wakes the worker), so fans hold no pool connection while idle.
func (u *worker) readNew(lane string) ([]rdb.Entry, error) {
	ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
	defer cancel()
	return rdb.ReadGroup(ctx, u.r.cfg.Client, lane, u.handler, u.r.cfg.Owner, ">", 1, -1)
}
