package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// discoveryLoop runs a discovery cycle each DiscoveryInterval until stop.
func (e *Engine) discoveryLoop(base context.Context, stop <-chan struct{}, all, leased []consumer, wg *sync.WaitGroup) {
	var fans []consumer
	for _, c := range all {
		if c.mode == modeFan {
			fans = append(fans, c)
		}
	}
	byHandler := map[string][]consumer{}
	var names []string
	for _, c := range leased {
		if byHandler[c.reg.Name] == nil {
			names = append(names, c.reg.Name)
		}
		byHandler[c.reg.Name] = append(byHandler[c.reg.Name], c)
	}
	fanRunning := e.unkeyed.Fans()
	t := time.NewTicker(e.o.DiscoveryInterval)
	defer t.Stop()
	// Announce first and claim one cycle later, so instances started
	// together see each other before claiming, instead of the first one
	// taking everything and handing most of it over again.
	e.members.Announce(base, e.handlers)
	settled := len(names) == 0
	for {
		for _, name := range names {
			switch {
			case !settled:
			case byHandler[name][0].mode == modePM:
				e.balancePM(base, stop, name, byHandler[name], wg)
			default:
				e.balance(base, stop, name, byHandler[name], wg)
			}
		}
		settled = true
		e.pruneCold()
		e.members.PruneFaults()
		for _, c := range fans {
			fanRunning.Sync(base, stop, c.reg.Name, c.category, wg)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// unit is one claimable partition of a handler: a keyed handler's
// partition stream, or a sequential pm's correlation value.
type unit struct {
	id    string
	ref   rdb.LeaseRef
	key   string
	cats  []string // the categories the lanes belong to
	lanes []string // the streams the lease covers
	c     consumer // a keyed handler's consumer (zero for a pm)
}

// balance is one discovery cycle for a keyed handler: its partitions are
// the streams in its categories' indexes.
func (e *Engine) balance(base context.Context, stop <-chan struct{}, handler string, cs []consumer, wg *sync.WaitGroup) {
	list := func(ctx context.Context) ([]unit, error) {
		var units []unit
		for _, c := range cs {
			keys, err := e.partitions(ctx, c.category)
			if err != nil {
				return nil, fmt.Errorf("reading the partition index of %s: %w", c.category, err)
			}
			e.warnSize(c.category, len(keys))
			for _, k := range keys {
				if checkKeySuffix(c.category, "", k, e.o.BackfillSuffix) != nil {
					continue
				}
				stream := rdb.PartitionStream(c.category, k)
				units = append(units, unit{id: worker.PartitionID(handler, stream), ref: rdb.PartitionLease(stream, handler), key: k,
					cats: []string{c.category}, lanes: []string{stream, rdb.BackfillStream(c.category, k, e.o.BackfillSuffix)}, c: c})
			}
		}
		return units, nil
	}
	e.cycle(base, stop, handler, wg, list, func(u unit, l rdb.Lease, sent time.Time) *worker.Worker {
		return e.workers.Keyed(base, worker.Handler{Name: u.c.reg.Name, AckBatch: u.c.reg.AckBatch}, u.c.category, u.key, l, sent)
	})
}

// balancePM is one discovery cycle for a sequential pm: its correlation
// values are the union of its categories' indexes (a value appears as soon
// as any category has a stream for it). Like balance for a keyed handler,
// it moves this instance's share toward ceil(values / live members).
func (e *Engine) balancePM(base context.Context, stop <-chan struct{}, name string, cs []consumer, wg *sync.WaitGroup) {
	reg := cs[0].reg
	cats := categories(reg)
	list := func(ctx context.Context) ([]unit, error) {
		seen := map[string]bool{}
		var units []unit
		for _, cat := range cats {
			keys, err := e.partitions(ctx, cat)
			if err != nil {
				return nil, fmt.Errorf("reading the partition index of %s: %w", cat, err)
			}
			e.warnSize(cat, len(keys))
			for _, k := range keys {
				if seen[k] || checkKeySuffix(cat, "", k, e.o.BackfillSuffix) != nil {
					continue
				}
				seen[k] = true
				var lanes []string
				for _, c := range cats {
					lanes = append(lanes, rdb.PartitionStream(c, k))
				}
				for _, c := range cats {
					lanes = append(lanes, rdb.BackfillStream(c, k, e.o.BackfillSuffix))
				}
				units = append(units, unit{id: worker.PMPartitionID(name, k), ref: rdb.PMLease(name, k, lanes[:len(cats)]), key: k, cats: cats, lanes: lanes})
			}
		}
		return units, nil
	}
	e.cycle(base, stop, name, wg, list, func(u unit, l rdb.Lease, sent time.Time) *worker.Worker {
		return e.workers.PM(base, worker.Handler{Name: reg.Name, AckBatch: reg.AckBatch}, cats, u.key, l, sent)
	})
}

// cycle is one discovery cycle of a keyed handler or sequential pm:
// announce this instance (as live only while it makes progress: the
// membership health strikes), list the units, report those left unowned (package maintenance),
// and move this instance's share toward ceil(units / live members):
// release the excess at a message boundary, or claim free units.
func (e *Engine) cycle(base context.Context, stop <-chan struct{}, handler string, wg *sync.WaitGroup,
	list func(context.Context) ([]unit, error), build func(unit, rdb.Lease, time.Time) *worker.Worker) {
	ctx, cancel := context.WithTimeout(base, max(e.o.DiscoveryInterval, time.Second))
	defer cancel()
	start := time.Now()
	defer func() {
		e.telemetry.DiscoveryDuration(ctx, handler, time.Since(start))
	}()
	// The handler's pause first: a cycle whose heartbeat fails still
	// honours a pause it can read.
	e.pauses.Read(ctx, handler)
	join := e.members.Progressing(handler)
	live, err := rdb.Announce(ctx, e.c, handler, e.o.OwnerID, e.members.MemberTTL(), join)
	if err != nil {
		e.log.Warn("seqby: member heartbeat failed", "handler", handler, "err", err)
		return
	}
	units, err := list(ctx)
	if err != nil {
		e.log.Warn("seqby: discovery failed", "handler", handler, "err", err)
		return
	}
	e.discovered(handler)
	defer e.maint.CheckUnowned(base, handler, maintenanceUnits(units))
	if !join {
		live++ // not in the set, but claiming: count it, or it would aim at everything
	}
	n, n0 := int(max(live, 1)), len(units)
	target := (len(units) + n - 1) / n

	need := e.share(handler, target)
	// One line per cycle that claimed anything, however many it claimed
	// (the first cycle of an instance may claim hundreds); the
	// per-partition lines are at debug.
	acquired := 0
	defer func() {
		if acquired > 0 {
			e.log.Info("seqby: partitions acquired", "handler", handler, "acquired", acquired,
				"owned", e.workers.Owned([]string{handler})[0], "target", target)
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
			if !e.skipHeld(handler, u.id, live, int64(n0)) && e.claimable(handler, u) {
				batch = append(batch, u)
			}
		}
		n := e.claim(ctx, wg, handler, batch, build)
		acquired += n
		need -= n
	}
}

// claimBatch bounds the acquires one pipeline sends.
const claimBatch = 256

// claimable reports whether this instance may try to claim u: it does not
// own it, and u is not cold (reaper.go), benched or struck (package
// membership).
func (e *Engine) claimable(handler string, u unit) bool {
	return !e.workers.Has(u.id) && e.warm(u.id) && !e.members.Benched(u.id) && !e.members.Struck(handler, u.id)
}

// claim leases the units of batch that are free, in one pipeline, and
// starts a worker for each; it returns how many it claimed. A unit found
// held is remembered (held.go), unless its lease is this instance's own
// from an acquire whose reply was lost (lease.Leases.Adopt); a cold one is left for
// the reaper.
func (e *Engine) claim(ctx context.Context, wg *sync.WaitGroup, handler string, batch []unit,
	build func(unit, rdb.Lease, time.Time) *worker.Worker) int {
	if len(batch) == 0 {
		return 0
	}
	marks := make([]uint64, len(batch))
	reqs := make([]rdb.AcquireReq, len(batch))
	for i, u := range batch {
		marks[i] = e.wake.Mark(u.cats[0], u.key)
		reqs[i] = rdb.AcquireReq{Ref: u.ref, Lanes: u.lanes}
	}
	var idle time.Duration
	if e.reaping() {
		idle = e.o.ReapAfter
	}
	sent := time.Now()
	leases, errs := rdb.AcquireAll(ctx, e.c, reqs, e.incarnation, e.o.LeaseTTL, idle)
	claimed := 0
	for i, u := range batch {
		l, err, at := leases[i], errs[i], sent
		if errors.Is(err, rdb.ErrCold) {
			e.markCold(u.id, u.cats, u.key, marks[i])
			continue
		}
		if errors.Is(err, rdb.ErrLeaseHeld) {
			adopted, ok := e.leases.Adopt(ctx, u.ref, err, &at)
			if !ok {
				e.markHeld(handler, u.id)
				continue
			}
			l, err = adopted, nil
			e.log.Debug("seqby: adopting this instance's own lease that no worker runs (an acquire whose reply was lost)",
				"handler", handler, "partition", u.key, "stream", u.lanes[0], "token", l.Token())
		}
		if err != nil {
			e.acquireFailed(handler, u.lanes[0], err)
			e.members.AcquireStrike(handler, u.id, err)
			continue
		}
		e.telemetry.LeaseAcquired(handler)
		e.members.Acquired(handler)
		e.claimedHeld(handler, u.id)
		w := build(u, l, at)
		e.workers.Add(w)
		e.log.Debug("seqby: acquired", "handler", handler, "partition", u.key, "stream", u.lanes[0], "token", l.Token())
		wg.Add(1)
		w.Start(wg.Done) // called as it ends: a sleeping worker has no goroutine
		claimed++
	}
	return claimed
}

// sizeWarnEvery is how often the warning about a category with too many
// partitions repeats while it stays above the threshold.
const sizeWarnEvery = 10 * time.Minute

// warnSize records a category's partition count at discovery and warns
// when it crosses PartitionWarnThreshold, then every sizeWarnEvery while
// it stays above; Status shows the categories above it. The map is bounded
// by the registered categories.
func (e *Engine) warnSize(category string, n int) {
	e.mu.Lock()
	if n <= e.o.PartitionWarnThreshold {
		delete(e.large, category)
		e.mu.Unlock()
		return
	}
	l, ok := e.large[category]
	warn := !ok || time.Since(l.warned) >= sizeWarnEvery
	if warn {
		l.warned = time.Now()
	}
	l.partitions = n
	e.large[category] = l
	e.mu.Unlock()
	if warn {
		e.log.Warn("seqby: category has many partitions; partitioned streams suit bounded key sets (tenants, accounts), not per-entity ids",
			"category", category, "partitions", n, "threshold", e.o.PartitionWarnThreshold)
	}
}

// largeCategory is a category above PartitionWarnThreshold.
type largeCategory struct {
	partitions int
	warned     time.Time
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
func (e *Engine) acquireFailed(handler, partition string, err error) {
	if errors.Is(err, rdb.ErrLeaseHeld) {
		return
	}
	e.mu.Lock()
	if e.acquireLogs == nil {
		e.acquireLogs = map[string]*acquireLog{}
	}
	al := e.acquireLogs[handler]
	if al == nil {
		al = &acquireLog{}
		e.acquireLogs[handler] = al
	}
	now := time.Now()
	if !al.last.IsZero() && now.Sub(al.last) < acquireLogEvery {
		al.suppressed++
		e.mu.Unlock()
		return
	}
	suppressed := al.suppressed
	al.last, al.suppressed = now, 0
	e.mu.Unlock()
	e.log.Warn("seqby: acquiring a lease failed; the partition stays unowned and unprocessed until an acquire succeeds (retried every discovery cycle). Check that Redis is reachable and healthy, and that the lease and generation keys hold what seqby wrote (the generation key must be an integer)",
		"handler", handler, "partition", partition, "err", err, "failures_not_logged", suppressed, "logged_at_most_every", acquireLogEvery)
}

// share compares what this instance owns of handler's partitions (or pm
// correlation values) with its fair share, target. Above it, it hands the
// excess over at a message boundary, halted partitions first (they carry
// no flow, and their next owner retries the head once more). It returns
// how many more to claim (zero or less: none).
func (e *Engine) share(handler string, target int) int {
	mine := e.workers.Mine(handler)
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
	e.log.Info("seqby: handing partitions over above fair share", "handler", handler, "handing_over", excess, "owned", len(mine), "target", target)
	for _, w := range mine[len(mine)-excess:] {
		e.log.Debug("seqby: handing over above fair share", "handler", handler, "partition", w.Key(), "stream", w.Stream())
		w.RequestRelease()
	}
	return 0
}
