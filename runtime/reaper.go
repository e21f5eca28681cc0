package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// Reaping (docs/operating.md, "Reaping") ends a cold partition: one whose lanes are
// empty, with nothing pending in any group, and to which nothing was
// published for ReapAfter. It takes three parts:
//
//   - its owner lets it go (its worker's cold release), in one script that
//     checks it is cold, so a publish either lands before (and the owner
//     keeps it) or finds it unowned;
//   - acquires refuse a cold partition (rdb.ErrCold), so nobody owns it
//     again until something is published to it; discovery then skips it
//     until a signal for its key arrives, or for coldRecheck;
//   - one instance at a time per category (the reaper lease) removes the
//     cold partitions nobody owns: streams, groups, generations, the pm
//     states' applied marks of the streams, and index entry (rdb.Reap,
//     whose doc shows why a concurrent publish is never lost and why the
//     marks must go with their streams).

// coldRecheck is how long discovery skips a partition found cold, unless
// a signal for its key comes first (a publish also signals).
const coldRecheck = worker.IdleRecheck

// coldMark is a partition an acquire found cold: mark is the waiter's
// count before that acquire, so any signal for the key after it shows.
type coldMark struct {
	at   time.Time
	mark uint64
	cats []string
	key  string
}

// warm reports whether discovery should try to acquire partition id:
// not found cold lately, or signalled since.
func (e *Engine) warm(id string) bool {
	e.mu.Lock()
	m, ok := e.cold[id]
	e.mu.Unlock()
	if !ok {
		return true
	}
	fresh := time.Since(m.at) < coldRecheck
	for _, c := range m.cats {
		if e.wake.Since(c, m.key, m.mark) {
			fresh = false
		}
	}
	if !fresh {
		e.mu.Lock()
		delete(e.cold, id)
		e.mu.Unlock()
	}
	return !fresh
}

// markCold remembers that an acquire of id, sent after mark, found it cold.
func (e *Engine) markCold(id string, cats []string, key string, mark uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cold == nil {
		e.cold = map[string]coldMark{}
	}
	e.cold[id] = coldMark{at: time.Now(), mark: mark, cats: cats, key: key}
}

// pruneCold forgets the cold marks older than coldRecheck, so the table
// holds at most the partitions found cold in the last coldRecheck
// (bounded by the indexes). Called every discovery cycle.
func (e *Engine) pruneCold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, m := range e.cold {
		if time.Since(m.at) >= coldRecheck {
			delete(e.cold, id)
		}
	}
}

// reaping reports whether cold partitions are let go and reaped.
func (e *Engine) reaping() bool { return e.o.ReapAfter > 0 }

// reapEvery is how often an engine tries to reap its categories.
func (e *Engine) reapEvery() time.Duration {
	return min(max(e.o.ReapAfter/2, e.o.DiscoveryInterval), 5*time.Minute)
}

// reapRenewEach is the share of LeaseTTL after which a reaper pass renews
// its lease between two checks: by time, since a check's cost varies with
// the link and the load (counting checks, a pass over a slow link let the
// lease lapse and stopped early).
const reapRenewEach = 3

// reapLoop reaps cats (the engine's partitioned categories) every
// reapEvery until stop.
func (e *Engine) reapLoop(base context.Context, stop <-chan struct{}, cats []string) {
	t := time.NewTicker(e.reapEvery())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, cat := range cats {
			e.reapCategory(base, stop, cat)
		}
	}
}

// reapCategory is one reaper pass over a category, under its reaper
// lease: settle what an earlier reaper left half done, then reap every
// cold partition nobody owns. The lease only keeps instances from
// repeating each other's work: every step is safe to run twice.
func (e *Engine) reapCategory(base context.Context, stop <-chan struct{}, cat string) {
	op := func() (context.Context, context.CancelFunc) { return context.WithTimeout(base, 5*time.Second) }
	ctx, cancel := op()
	ref := rdb.ReaperLease(cat)
	renewed := time.Now() // the lease's term runs from the acquire's send
	l, err := rdb.Acquire(ctx, e.c, ref, e.incarnation, e.o.LeaseTTL)
	if err != nil {
		// Held by this incarnation: the acquire ran twice (its reply was
		// lost and the client sent it again) or an earlier pass could not
		// release it. Only this loop takes the reaper lease, so it is
		// this pass's to use rather than a block for LeaseTTL.
		var sent time.Time
		if own, ok := e.leases.Adopt(ctx, ref, err, &sent); ok {
			l, err, renewed = own, nil, sent
		}
	}
	cancel()
	if err != nil {
		if !errors.Is(err, rdb.ErrLeaseHeld) {
			e.log.Warn("seqby: reaper could not take its lease; retried next pass", "category", cat, "err", err)
		}
		return
	}
	defer func() {
		ctx, cancel := op()
		l.Release(ctx, e.c)
		cancel()
	}()
	var groups, keys []string
	err = func() error {
		ctx, cancel := op()
		defer cancel()
		if _, err := rdb.SettleReaping(ctx, e.c, cat, e.o.BackfillSuffix); err != nil {
			return err
		}
		var err error
		if groups, err = rdb.Groups(ctx, e.c, cat); err != nil {
			return err
		}
		keys, err = rdb.Partitions(ctx, e.c, cat)
		return err
	}()
	if err != nil {
		e.log.Warn("seqby: reaper pass failed; retried next pass", "category", cat, "err", err)
		return
	}
	reaped := 0
	for _, k := range keys {
		if time.Since(renewed) >= e.o.LeaseTTL/reapRenewEach {
			sent := time.Now()
			ctx, cancel := op()
			err := l.Renew(ctx, e.c, e.o.LeaseTTL)
			cancel()
			if err != nil {
				e.log.Warn("seqby: reaper lost its lease; pass stopped", "category", cat, "err", err)
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
		ok, err := rdb.Reap(ctx, e.c, cat, k, e.o.BackfillSuffix, groups, e.o.ReapAfter)
		cancel()
		if err != nil {
			e.log.Warn("seqby: reaping a partition failed; retried next pass", "category", cat, "partition", k, "err", err)
			continue
		}
		if ok {
			reaped++
		}
	}
	if reaped > 0 {
		e.index.invalidate(cat)
		e.log.Info("seqby: reaped cold partitions", "category", cat, "reaped", reaped, "partitions", len(keys))
	}
}
