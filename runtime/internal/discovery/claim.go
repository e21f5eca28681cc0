package discovery

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/maintenance"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// cycle is one discovery cycle of a keyed handler or sequential pm:
// announce this instance (as live only while it makes progress: the
// membership health strikes), list the units, report those left unowned
// (package maintenance), and move this instance's share toward
// ceil(units / live members): release the excess at a message boundary,
// or claim free units.
func (d *Discovery) cycle(base context.Context, stop <-chan struct{}, handler string, wg *sync.WaitGroup,
	list func(context.Context) ([]unit, error), build func(unit, rdb.Lease, time.Time) *worker.Worker) {
	ctx, cancel := context.WithTimeout(base, max(d.cfg.DiscoveryInterval, time.Second))
	defer cancel()
	start := time.Now()
	defer func() {
		d.cfg.Telemetry.DiscoveryDuration(ctx, handler, time.Since(start))
	}()
	// The handler's pause first: a cycle whose heartbeat fails still
	// honours a pause it can read.
	d.cfg.Pauses.Read(ctx, handler)
	join := d.cfg.Members.Progressing(handler)
	live, err := rdb.Announce(ctx, d.cfg.Client, handler, d.cfg.Owner, d.cfg.Members.MemberTTL(), join)
	if err != nil {
		d.cfg.Log.Warn("seqby: member heartbeat failed", "handler", handler, "err", err)
		return
	}
	units, err := list(ctx)
	if err != nil {
		d.cfg.Log.Warn("seqby: discovery failed", "handler", handler, "err", err)
		return
	}
	d.discovered(handler)
	defer d.cfg.Unowned(base, handler, maintenanceUnits(units))
	if !join {
		live++ // not in the set, but claiming: count it, or it would aim at everything
	}
	n, n0 := int(max(live, 1)), len(units)
	target := (len(units) + n - 1) / n

	need := d.share(handler, target)
	if d.cfg.Members != nil && d.cfg.Members.GenGroups(ctx, handler) {
		d.moveGroups(handler)
	}
	// One line per cycle that claimed anything, however many it claimed
	// (the first cycle of an instance may claim hundreds); the
	// per-partition lines are at debug.
	acquired := 0
	defer func() {
		if acquired > 0 {
			d.cfg.Log.Info("seqby: partitions acquired", "handler", handler, "acquired", acquired,
				"owned", d.cfg.Workers.Owned([]string{handler})[0], "target", target)
		}
	}()
	rand.Shuffle(len(units), func(i, j int) { units[i], units[j] = units[j], units[i] })
	for len(units) > 0 && need > 0 {
		select {
		case <-stop:
			return
		default:
		}
		if ctx.Err() != nil {
			return // the cycle's time is up: the next cycle goes on
		}
		var batch []unit
		for len(units) > 0 && len(batch) < min(need, claimBatch) {
			u := units[0]
			units = units[1:]
			if !d.skipHeld(handler, u.id, live, int64(n0)) && d.claimable(handler, u) {
				batch = append(batch, u)
			}
		}
		n := d.claim(ctx, wg, handler, batch, build)
		acquired += n
		need -= n
	}
}

// maintenanceUnits converts the units for the unowned check.
func maintenanceUnits(units []unit) []maintenance.Unit {
	out := make([]maintenance.Unit, len(units))
	for i, u := range units {
		out[i] = maintenance.Unit{ID: u.id, Ref: u.ref, Key: u.key, Cats: u.cats, Lanes: u.lanes}
	}
	return out
}

// claimBatch bounds the acquires one pipeline sends.
const claimBatch = 256

// claimable reports whether this instance may try to claim u: it does not
// own it, and u is not cold, benched or struck (package membership).
func (d *Discovery) claimable(handler string, u unit) bool {
	return !d.cfg.Workers.Has(u.id) && d.warm(u.id) && !d.cfg.Members.Benched(u.id) && !d.cfg.Members.Struck(handler, u.id)
}

// claim leases the units of batch that are free, in one pipeline, and
// starts a worker for each; it returns how many it claimed. A unit found
// held is remembered, unless its lease is this instance's own from an
// acquire whose reply was lost (lease.Leases.Adopt); a cold one is left
// for the reaper.
func (d *Discovery) claim(ctx context.Context, wg *sync.WaitGroup, handler string, batch []unit,
	build func(unit, rdb.Lease, time.Time) *worker.Worker) int {
	if len(batch) == 0 {
		return 0
	}
	marks := make([]uint64, len(batch))
	reqs := make([]rdb.AcquireReq, len(batch))
	// Move the lanes to the lease generation's consumer group once every
	// live deploy record on the handler's categories allows it; until
	// then a lane keeps the group it has (docs/upgrading.md).
	gen := d.cfg.Members != nil && d.cfg.Members.GenGroups(ctx, handler)
	for i, u := range batch {
		marks[i] = d.cfg.Wake.Mark(u.cats[0], u.key)
		reqs[i] = rdb.AcquireReq{Ref: u.ref, Lanes: u.lanes, GenGroups: gen}
	}
	var idle time.Duration
	if d.cfg.ReapAfter > 0 {
		idle = d.cfg.ReapAfter
	}
	sent := time.Now()
	leases, errs := rdb.AcquireAll(ctx, d.cfg.Client, reqs, d.cfg.Incarnation, d.cfg.LeaseTTL, idle)
	claimed := 0
	for i, u := range batch {
		l, err, at := leases[i], errs[i], sent
		if errors.Is(err, rdb.ErrCold) {
			d.markCold(u.id, u.cats, u.key, marks[i])
			continue
		}
		if errors.Is(err, rdb.ErrLeaseHeld) {
			adopted, ok := d.cfg.Leases.Adopt(ctx, u.ref, err, &at)
			if !ok {
				d.markHeld(handler, u.id)
				continue
			}
			l, err = adopted, nil
			d.cfg.Log.Debug("seqby: adopting this instance's own lease that no worker runs (an acquire whose reply was lost)",
				"handler", handler, "partition", u.key, "stream", u.lanes[0], "token", l.Token())
		}
		if err != nil {
			d.acquireFailed(handler, u.lanes[0], err)
			d.cfg.Members.AcquireStrike(handler, u.id, err)
			continue
		}
		d.cfg.Telemetry.LeaseAcquired(handler)
		d.cfg.Members.Acquired(handler)
		d.claimedHeld(handler, u.id)
		w := build(u, l, at)
		d.cfg.Workers.Add(w)
		d.cfg.Log.Debug("seqby: acquired", "handler", handler, "partition", u.key, "stream", u.lanes[0], "token", l.Token())
		wg.Add(1)
		w.Start(wg.Done) // called as it ends: a sleeping worker has no goroutine
		claimed++
	}
	return claimed
}

// share compares what this instance owns of handler's partitions (or pm
// correlation values) with its fair share, target. Above it, it hands the
// excess over at a message boundary, halted partitions first (they carry
// no flow, and their next owner retries the head once more). It returns
// how many more to claim (zero or less: none).
func (d *Discovery) share(handler string, target int) int {
	mine := d.cfg.Workers.Mine(handler)
	excess := len(mine) - target
	if excess <= 0 {
		return -excess
	}
	sort.Slice(mine, func(i, j int) bool {
		if mine[i].Halted() != mine[j].Halted() {
			return !mine[i].Halted()
		}
		return mine[i].ID() < mine[j].ID()
	})
	// One line per cycle, as for acquires; the per-partition lines are at
	// debug.
	d.cfg.Log.Info("seqby: handing partitions over above fair share", "handler", handler, "handing_over", excess, "owned", len(mine), "target", target)
	for _, w := range mine[len(mine)-excess:] {
		d.cfg.Log.Debug("seqby: handing over above fair share", "handler", handler, "partition", w.Key(), "stream", w.Stream())
		w.RequestRelease()
	}
	return 0
}

// acquireLogEvery rate-limits the warning about failed lease acquires,
// which would otherwise repeat every discovery cycle for every partition.
const acquireLogEvery = time.Minute

// acquireLog is the rate limit of one handler's acquire-failure warning.
type acquireLog struct {
	last       time.Time
	suppressed int
}

// acquireFailed reports a failed lease acquire. A lease held by another
// owner is the normal case and stays silent. Anything else (Redis
// unreachable or failing, a corrupted lease or generation key) leaves the
// partition without an owner, so it is logged: the first failure at once,
// then at most once per acquireLogEvery per handler with the number of
// failures not logged meanwhile (the map is bounded by the handlers).
func (d *Discovery) acquireFailed(handler, partition string, err error) {
	if errors.Is(err, rdb.ErrLeaseHeld) {
		return
	}
	d.mu.Lock()
	al := d.acquireLogs[handler]
	if al == nil {
		al = &acquireLog{}
		d.acquireLogs[handler] = al
	}
	now := time.Now()
	if !al.last.IsZero() && now.Sub(al.last) < acquireLogEvery {
		al.suppressed++
		d.mu.Unlock()
		return
	}
	suppressed := al.suppressed
	al.last, al.suppressed = now, 0
	d.mu.Unlock()
	d.cfg.Log.Warn("seqby: acquiring a lease failed; the partition stays unowned and unprocessed until an acquire succeeds (retried every discovery cycle). Check that Redis is reachable and healthy, and that the lease and generation keys hold what seqby wrote (the generation key must be an integer)",
		"handler", handler, "partition", partition, "err", err, "failures_not_logged", suppressed, "logged_at_most_every", acquireLogEvery)
}
